import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { testServices } from '@mcb/testkit';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const cli = fileURLToPath(new URL('../src/db/migrate-cli.ts', import.meta.url));

describe('pnpm db:migrate', () => {
  const name = `mcb_t_${Date.now()}_${randomBytes(4).toString('hex')}`;
  const url = new URL(testServices().databaseUrl);
  url.pathname = `/${name}`;
  const admin = new URL(testServices().databaseUrl);
  admin.pathname = '/postgres';

  afterAll(async () => {
    const c = new pg.Client({ connectionString: admin.toString() });
    await c.connect();
    await c.query(`drop database if exists "${name}" with (force)`);
    await c.end();
  });

  const migrate = () =>
    run(process.execPath, [cli], { env: { ...process.env, DATABASE_URL: url.toString() }, encoding: 'utf8' });

  const schemaFingerprint = async () => {
    const c = new pg.Client({ connectionString: url.toString() });
    await c.connect();
    try {
      const r = await c.query(
        `select table_name, column_name, data_type from information_schema.columns
          where table_schema = 'public' order by 1, 2`,
      );
      const m = await c.query('select count(*)::int as n from drizzle.__drizzle_migrations');
      return { columns: r.rows, migrations: m.rows[0].n as number };
    } finally {
      await c.end();
    }
  };

  it('creates a missing database, migrates it, and a second run changes nothing', async () => {
    const first = await migrate();
    expect(first.stdout).toContain(`created database`);
    expect(first.stdout).toMatch(/applied \d+ migration/);
    const before = await schemaFingerprint();
    expect(before.columns.map((c) => c.table_name)).toContain('callback_receipts');
    expect(before.migrations).toBeGreaterThan(0);

    const second = await migrate();
    expect(second.stdout).not.toContain('created database');
    expect(second.stdout).toContain('is up to date');
    expect(await schemaFingerprint()).toEqual(before);
  });

  it('connects to DATABASE_MIGRATION_URL when set (DATABASE_URL may point at PgBouncer, which cannot hold its lock)', async () => {
    const r = await run(process.execPath, [cli], {
      env: {
        ...process.env,
        DATABASE_URL: 'postgres://postgres@127.0.0.1:1/bouncer',
        DATABASE_MIGRATION_URL: url.toString(),
      },
      encoding: 'utf8',
    });
    expect(r.stdout).toContain(`${url.host}${url.pathname} is up to date`);
  });

  it('fails with a clear message when Postgres is unreachable', async () => {
    const err = await run(process.execPath, [cli], {
      env: { ...process.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' },
      encoding: 'utf8',
    }).catch((e: { code: number; stderr: string }) => e);
    expect((err as { code: number }).code).toBe(1);
    expect((err as { stderr: string }).stderr).toMatch(/Postgres is not reachable/);
  });
});
