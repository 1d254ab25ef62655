import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { useTestEnv } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasEnv, leftListening } from '../helpers/process-scan.ts';
import type { DemoMerchantsSummary, DemoSummary } from '../../scripts/lib/demo-report.ts';

const ROOT = resolve(import.meta.dirname, '../..');

/** Carried by every process of a run this file starts (the demo passes its environment to the apps). */
const MARK = 'MCB_DEMO_TEST_RUN';

/**
 * Run `pnpm demo` as the user would (node scripts/demo.ts), with this file's database, prefix and keys.
 * `onOutput` sees stdout as it grows and may signal the child.
 */
function runDemo(
  args: string[],
  env: Record<string, string>,
  onOutput?: (out: string, child: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }> {
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // Settings the demo reads must come from this test, never from the shell that runs the suite.
    if (
      v !== undefined &&
      !/^(CONSOLE_TOKEN|MERCHANT_PRIVATE_KEY_FILE|DATABASE_URL|QUEUE_PREFIX|.*_PORT|SANDBOX_.*|DEMO_.*)$/.test(k)
    )
      childEnv[k] = v;
  }
  // MCB_ENV_FILE=none: the demo must not write (or read) the checkout's .env from a test.
  const child = spawn(process.execPath, ['scripts/demo.ts', ...args], {
    cwd: ROOT,
    env: { ...childEnv, MCB_ENV_FILE: 'none', ...env },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c) => {
    out += String(c);
    onOutput?.(out, child);
  });
  child.stderr.on('data', (c) => (err += String(c)));
  return new Promise((resolvePromise) =>
    // 'close', not 'exit': the demo's last lines may still be in the pipe when it exits.
    child.once('close', (code, signal) => resolvePromise({ code, signal, out, err })),
  );
}

describe('pnpm demo --once', () => {
  const env = useTestEnv();
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcb-demo-test-'));
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('exits 0 after a run whose summary matches the database', { timeout: 90_000 }, async () => {
    const summaryFile = join(dir, 'summary.json');
    const { code, out, err } = await runDemo(
      ['--once', '--orders', '40', '--free-ports', '--summary-file', summaryFile],
      {
        DEMO_DATABASE_URL: env.databaseUrl,
        DEMO_QUEUE_PREFIX: env.prefix,
        REDIS_URL: env.redisUrl,
        KEYS_DIR: join(dir, 'keys'),
        DEMO_LOG_DIR: join(dir, 'logs'),
        SANDBOX_TIME_SCALE: '600',
        LOG_LEVEL: 'warn',
      },
    );
    expect(err, out).toBe('');
    expect(code, out).toBe(0);
    expect(out).toContain('All checks held.');
    expect(out).toMatch(/generated a merchant key pair/);
    expect(statSync(join(dir, 'keys', 'merchant-private.pem')).mode & 0o777).toBe(0o600);

    // The summary's numbers, recounted from the database the demo wrote to.
    const s = JSON.parse(readFileSync(summaryFile, 'utf8')) as DemoSummary;
    const like = `${s.runId}-%`;
    const count = async (sql: string) =>
      Number((await env.db.pool.query<{ count: string }>(sql, [like])).rows[0]?.count);
    expect(s.orders).toBe(40);
    expect(s.credited).toBe(
      await count(
        `select count(*) from orders where kind = 'payin' and status = 'credited' and merchant_order_no like $1`,
      ),
    );
    expect(s.credited).toBe(
      await count(
        `select count(*) from ledger_entries l join orders o on o.id = l.order_id where l.entry_type = 'payin_credit' and o.merchant_order_no like $1`,
      ),
    );
    expect(s.refunds).toBe(
      await count(
        `select count(*) from ledger_entries l join orders o on o.id = l.order_id where l.entry_type = 'payout_refund' and o.merchant_order_no like $1`,
      ),
    );
    expect(s.refunds).toBe(
      await count(
        `select count(*) from orders where kind = 'payout' and status = 'refused' and merchant_order_no like $1`,
      ),
    );
    expect(s.refunds).toBeGreaterThan(0);
    expect(s.payoutsSucceeded).toBe(
      await count(`select count(*) from orders where status = 'succeeded' and merchant_order_no like $1`),
    );
    expect(s.forgeriesCaught).toBe(2);
    expect(await count(`select count(*) from reviews where status = 'open' and merchant_order_no like $1`)).toBe(2);
    const receipts = await count(`select count(*) from callback_receipts where merchant_order_no like $1`);
    expect(s.duplicatesDropped).toBeGreaterThan(0);
    expect(s.received).toBe(receipts + s.duplicatesDropped + s.forgeriesSent);
    expect(s.latencyMs.count).toBe(s.credited);
    expect(s.checks.every((c) => c.ok)).toBe(true);
  });

  it(
    'with --merchants 2 runs two merchant numbers, each its own key and account, and summarises each',
    { timeout: 90_000 },
    async () => {
      const summaryFile = join(dir, 'summary-merchants.json');
      const keys = join(dir, 'keys-merchants');
      const { code, out, err } = await runDemo(
        ['--once', '--merchants', '2', '--orders', '20', '--free-ports', '--summary-file', summaryFile],
        {
          DEMO_DATABASE_URL: env.databaseUrl,
          DEMO_QUEUE_PREFIX: env.prefix,
          REDIS_URL: env.redisUrl,
          KEYS_DIR: keys,
          DEMO_LOG_DIR: join(dir, 'logs-merchants'),
          LOG_LEVEL: 'warn',
        },
      );
      expect(err, out).toBe('');
      expect(code, out).toBe(0);
      expect(out).toContain('All checks held for every merchant (2).');
      expect(out).toMatch(/^Merchant m1 \(M100001\): summary of run /m);
      expect(out).toMatch(/^Merchant m2 \(M100002\): summary of run /m);

      // 1. Two merchants in the MERCHANTS_FILE written next to their keys, each with a key pair of its own.
      const file = JSON.parse(readFileSync(join(keys, 'merchants.json'), 'utf8')) as {
        merchants: { ref: string; merchantNo: string; privateKeyFiles: string[]; legacyRoutes?: boolean }[];
      };
      expect(file.merchants.map((m) => [m.ref, m.merchantNo, m.legacyRoutes ?? false])).toEqual([
        ['m1', 'M100001', true],
        ['m2', 'M100002', false],
      ]);
      const [k1, k2] = file.merchants.map((m) => m.privateKeyFiles[0]!);
      expect(k1).not.toBe(k2);
      expect(readFileSync(k1!, 'utf8')).not.toBe(readFileSync(k2!, 'utf8'));
      for (const k of [k1!, k2!]) expect(statSync(k).mode & 0o777).toBe(0o600);

      // 2. Each merchant's summary, recounted from the database under its own number: both credited.
      const report = JSON.parse(readFileSync(summaryFile, 'utf8')) as DemoMerchantsSummary;
      expect(report.ok).toBe(true);
      expect(report.merchants.map((m) => m.merchant)).toEqual([
        { ref: 'm1', merchantNo: 'M100001' },
        { ref: 'm2', merchantNo: 'M100002' },
      ]);
      for (const s of report.merchants) {
        const count = async (sql: string) =>
          Number(
            (await env.db.pool.query<{ count: string }>(sql, [`${s.runId}-%`, s.merchant!.merchantNo])).rows[0]?.count,
          );
        expect(s.credited, s.runId).toBeGreaterThan(0);
        expect(s.credited).toBe(
          await count(
            `select count(*) from ledger_entries l join orders o on o.id = l.order_id
              where l.entry_type = 'payin_credit' and o.merchant_order_no like $1 and o.merchant_no = $2`,
          ),
        );
        expect(s.forgeriesCaught).toBe(2);
        expect(await count(`select count(*) from reviews where merchant_order_no like $1 and merchant_no = $2`)).toBe(
          2,
        );
        const receipts = await count(
          `select count(*) from callback_receipts where merchant_order_no like $1 and merchant_no = $2`,
        );
        expect(s.received).toBe(receipts + s.duplicatesDropped + s.forgeriesSent);
        expect(s.checks.find((c) => c.name.startsWith('every order is booked to merchant'))?.ok).toBe(true);
      }
    },
  );

  it(
    "without --once keeps the services up with the dashboard URL; Ctrl-C stops every one of them and exits with the run's status",
    { timeout: 90_000 },
    async () => {
      let interrupted = false;
      const mark = randomBytes(6).toString('hex');
      const { code, out } = await runDemo(
        ['--orders', '10', '--free-ports'],
        {
          DEMO_DATABASE_URL: env.databaseUrl,
          DEMO_QUEUE_PREFIX: env.prefix,
          REDIS_URL: env.redisUrl,
          KEYS_DIR: join(dir, 'keys'),
          DEMO_LOG_DIR: join(dir, 'logs-up'),
          LOG_LEVEL: 'warn',
          [MARK]: mark,
        },
        (text, child) => {
          if (!interrupted && text.includes('The services stay up until Ctrl-C')) {
            interrupted = true;
            child.kill('SIGINT');
          }
        },
      );
      expect(interrupted, out).toBe(true);
      // Ctrl-C is how a finished demo is stopped, not a failure (pnpm would print ELIFECYCLE for 130): the checks held.
      expect(code, out).toBe(0);
      expect(out).toMatch(/dashboard {3}http:\/\/127\.0\.0\.1:\d+\/queues/);
      // Every listener the demo printed is gone: the apps were stopped, not orphaned.
      const ports = [...out.matchAll(/http:\/\/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]));
      expect(ports.length).toBeGreaterThanOrEqual(3);
      // A listener that is not the run's is a neighbour's: this file runs beside another, which may be given a freed port.
      expect([...new Set(ports)].flatMap((port) => leftListening(port, (p) => hasEnv(p.pid, MARK, mark)))).toEqual([]);
    },
  );

  it('says exactly how to start Redis when it is unreachable, and exits 1', async () => {
    const port = await new Promise<number>((resolvePromise) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const { port: p } = server.address() as net.AddressInfo;
        server.close(() => resolvePromise(p));
      });
    });
    const { code, err } = await runDemo(['--once', '--free-ports'], {
      DEMO_DATABASE_URL: env.databaseUrl,
      REDIS_URL: `redis://127.0.0.1:${port}`,
      KEYS_DIR: join(dir, 'keys'),
    });
    expect(code).toBe(1);
    expect(err).toContain(`Redis at 127.0.0.1:${port} is not reachable`);
    expect(err).toContain('docker compose up -d postgres redis');
    expect(err).toContain('redis-server --daemonize yes');
    expect(err).not.toContain('Postgres at');
  });

  it('names a port that is taken instead of starting half the services', async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as net.AddressInfo;
    try {
      const { code, err } = await runDemo(['--once', '--free-ports'], {
        DEMO_DATABASE_URL: env.databaseUrl,
        DEMO_QUEUE_PREFIX: env.prefix,
        REDIS_URL: env.redisUrl,
        KEYS_DIR: join(dir, 'keys'),
        DEMO_LOG_DIR: join(dir, 'logs'),
        SANDBOX_PORT: String(port),
      });
      expect(code).toBe(1);
      expect(err).toContain(`port already in use: SANDBOX_PORT=${port}`);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('refuses a bad flag with usage and status 2', async () => {
    const { code, err } = await runDemo(['--orders', 'many'], {});
    expect(code).toBe(2);
    expect(err).toContain('--orders: expected a whole number');
    const merchants = await runDemo(['--merchants', '0'], {});
    expect(merchants.code).toBe(2);
    expect(merchants.err).toContain('--merchants: expected a whole number from 1 to 8');
  });
});
