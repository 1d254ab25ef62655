import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateDatabase, MIGRATIONS_FOLDER, requireMigratedSchema, shippedMigrations } from '@mcb/core/db';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { deletePrefix, freePort, MERCHANT_NO, testServices, uniquePrefix, waitFor } from '@mcb/testkit';
import { startNodeProcess, type NodeProcess } from './reliability/helpers/node-process.ts';

// A worker or a console started on a database without this build's migrations says so and stops before it takes a
// job or serves a request: it once logged "worker started" on a database without tables and failed jobs for good
// with `42P01 relation "orders" does not exist`.
const dir = mkdtempSync(join(tmpdir(), 'mcb-schema-'));
const database = `mcb_unmigrated_${randomBytes(4).toString('hex')}`;
const prefix = uniquePrefix('schema');
const admin = new pg.Client({ connectionString: withDatabase(testServices().databaseUrl, 'postgres') });
const redis = new Redis(testServices().redisUrl, { maxRetriesPerRequest: 1 });
const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix });
const procs: NodeProcess[] = [];
const url = withDatabase(testServices().databaseUrl, database);

function withDatabase(base: string, name: string): string {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}

beforeAll(async () => {
  await admin.connect();
  await admin.query(`create database "${database}"`);
});

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await queue.close();
  redis.disconnect();
  await deletePrefix(testServices().redisUrl, prefix);
  await admin.query(`drop database if exists "${database}" with (force)`);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
});

async function start(app: 'worker' | 'console'): Promise<{ proc: NodeProcess; metricsPort: number }> {
  const metricsPort = await freePort();
  const proc = startNodeProcess(
    app,
    `apps/${app}/src/main.ts`,
    {
      DATABASE_URL: url,
      REDIS_URL: testServices().redisUrl,
      QUEUE_PREFIX: prefix,
      MERCHANT_NO,
      PLATFORM_BASE_URL: 'http://127.0.0.1:9',
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: 'a-console-token-of-16+',
      CONSOLE_PORT: String(await freePort()),
      WORKER_METRICS_PORT: String(metricsPort),
      CONSOLE_METRICS_PORT: String(metricsPort),
    },
    join(dir, `${app}-${procs.length}.log`),
  );
  procs.push(proc);
  return { proc, metricsPort };
}

const logOf = (proc: NodeProcess) => readFileSync(join(dir, `${proc.name}-${procs.indexOf(proc)}.log`), 'utf8');

describe("a database without this build's migrations", () => {
  it('the worker says which migrations are missing, exits 1 and leaves the waiting job untouched', async () => {
    const job = await queue.add(
      'payin',
      { kind: 'payin' },
      { jobId: `payin-SCHEMA${randomBytes(3).toString('hex')}-6` },
    );
    const { proc } = await start('worker');
    expect((await proc.exited).code).toBe(1);
    const log = logOf(proc);
    expect(log).toMatch(/DB_SCHEMA_OUTDATED/);
    const shipped = shippedMigrations().map((m) => m.tag);
    expect(shipped.slice(0, 3)).toEqual([
      '0000_initial_schema',
      '0001_ledger_amount_positive',
      '0002_ledger_append_only',
    ]);
    expect(log).toContain(
      `${shipped.length} migration(s) not applied (${shipped.slice(0, 5).join(', ')}${shipped.length > 5 ? ', ...' : ''})`,
    );
    expect(log).toMatch(/pnpm db:migrate/);
    expect(log).not.toMatch(/worker started/);
    expect(await job.getState()).toBe('waiting');
    expect((await queue.getJob(job.id!))?.attemptsMade).toBe(0);
  });

  it('the console says so and exits 1 before it listens', async () => {
    const { proc } = await start('console');
    expect((await proc.exited).code).toBe(1);
    expect(logOf(proc)).toMatch(/DB_SCHEMA_OUTDATED.*console was built for/);
    expect(logOf(proc)).not.toMatch(/console started/);
  });

  it('one migration behind is refused too, naming only that one', async () => {
    await migrateDatabase(url);
    const latest = shippedMigrations().at(-1)!;
    const db = createDb(url, { max: 1 });
    try {
      await db.pool.query('delete from drizzle.__drizzle_migrations where created_at = $1', [latest.when]);
    } finally {
      await db.close();
    }
    const { proc } = await start('worker');
    expect((await proc.exited).code).toBe(1);
    expect(logOf(proc)).toMatch(new RegExp(`1 migration\\(s\\) not applied \\(${latest.tag}\\)`));
  });

  it('once migrated, the worker starts and takes the job', async () => {
    // The last migration's schema change is in place (the row alone was removed above): record it again.
    const latest = shippedMigrations().at(-1)!;
    const db = createDb(url, { max: 1 });
    try {
      await db.pool.query('insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)', [
        latest.hash,
        latest.when,
      ]);
    } finally {
      await db.close();
    }
    const { proc, metricsPort } = await start('worker');
    await waitFor(
      async () =>
        proc.child.exitCode === null &&
        (await fetch(`http://127.0.0.1:${metricsPort}/healthz`).catch(() => undefined))?.ok === true,
      {
        timeoutMs: 30_000,
        message: 'worker not up on a migrated database',
      },
    );
    const [job] = await queue.getJobs(['waiting', 'active', 'delayed', 'failed', 'completed']);
    await waitFor(
      async () =>
        ((await queue.getJob(job!.id!))?.attemptsMade ?? 0) > 0 ||
        (await queue.getJob(job!.id!))?.failedReason !== undefined,
      {
        timeoutMs: 20_000,
        message: 'the job was never taken',
      },
    );
  });
});

describe('a database migrated further than this build (a newer release rolling out)', () => {
  it('is accepted, and logged', async () => {
    // This build without its latest migration: the database (fully migrated above) is one ahead of it.
    const older = join(dir, 'drizzle');
    cpSync(MIGRATIONS_FOLDER, older, { recursive: true });
    const journal = JSON.parse(readFileSync(join(older, 'meta', '_journal.json'), 'utf8')) as { entries: unknown[] };
    journal.entries.pop();
    writeFileSync(join(older, 'meta', '_journal.json'), JSON.stringify(journal));
    const lines: string[] = [];
    const logger = { warn: (_: object, m: string) => lines.push(m), info: (_: object, m: string) => lines.push(m) };
    const db = createDb(url, { max: 1 });
    try {
      const status = await requireMigratedSchema(db.pool, { app: 'worker', logger, folder: older });
      expect(status.newer).toBe(1);
      expect(status.missing).toEqual([]);
      expect(lines).toEqual(['the database holds migrations newer than this build (a newer release is rolling out)']);
    } finally {
      await db.close();
    }
  });
});
