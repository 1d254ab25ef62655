import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseEnv, promisify } from 'node:util';
import { metricValue } from '@mcb/core/metrics';
import { uniquePrefix, useTestEnv, waitFor } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// `pnpm dev --merchants 2` (issue 51): two merchant numbers, each with its own key pair, sandbox account, route and
// queue; `pnpm sandbox trigger --merchant m2` in another shell ends in m2's credit, and every app's /metrics counts it
// under merchant="m2" only, with no series of another label value than the configured refs.
const ROOT = resolve(import.meta.dirname, '../..');
const env = useTestEnv();
const dir = mkdtempSync(join(tmpdir(), 'mcb-dev-merchants-'));
const envFile = join(dir, '.env');
let dev: ChildProcess;
let devOut = '';

/** A pnpm script as `pnpm <name>` runs it: node with the .env preload, from the repository root, nothing exported. */
const pnpmScript = (script: string, args: string[]) =>
  promisify(execFile)(process.execPath, ['--import', './scripts/load-env.ts', script, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', MCB_ENV_FILE: envFile },
    timeout: 60_000,
  }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({
      code: e.code ?? -1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? '',
    }),
  );

beforeAll(async () => {
  // DEV_MERCHANTS, the environment's spelling of --merchants.
  dev = spawn(process.execPath, ['--import', './scripts/load-env.ts', 'scripts/dev.ts', '--free-ports'], {
    cwd: ROOT,
    detached: true,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      MCB_ENV_FILE: envFile,
      DEV_MERCHANTS: '2',
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      QUEUE_PREFIX: uniquePrefix('devmerchants'),
      KEYS_DIR: join(dir, 'keys'),
      LOG_LEVEL: 'warn',
    },
  });
  dev.stdout!.on('data', (c) => (devOut += String(c)));
  dev.stderr!.on('data', (c) => (devOut += String(c)));
  await waitFor(() => devOut.includes('all four apps are up') || dev.exitCode !== null, {
    timeoutMs: 60_000,
    message: 'pnpm dev --merchants 2 did not come up',
  }).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}; its output:\n${devOut}`);
  });
  if (dev.exitCode !== null) throw new Error(`pnpm dev exited ${dev.exitCode}:\n${devOut}`);
}, 90_000);

afterAll(async () => {
  if (dev && dev.exitCode === null && dev.signalCode === null) {
    const exited = new Promise((r) => dev.once('exit', r));
    process.kill(-dev.pid!, 'SIGINT');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe('pnpm dev --merchants 2', () => {
  it('runs two merchants from the MERCHANTS_FILE it wrote, and the .env names the file instead of MERCHANT_NO', () => {
    expect(devOut).toContain(
      `merchants m1 (M100001), m2 (M100002): MERCHANTS_FILE ${join(dir, 'keys', 'merchants.json')}`,
    );
    expect(devOut).toMatch(/callbacks\/m\/\{ref\}\/payin, \.\.\.\/payout for m1 \(M100001\), m2 \(M100002\)/);
    const written = parseEnv(readFileSync(envFile, 'utf8'));
    expect(written.MERCHANTS_FILE).toBe(join(dir, 'keys', 'merchants.json'));
    expect(Object.keys(written)).not.toContain('MERCHANT_NO');
    expect(written.SANDBOX_PAYIN_CALLBACK_URL).toMatch(/\/callbacks\/m\/\{ref\}\/payin$/);
  });

  it("pnpm sandbox trigger --merchant m2 ends in m2's credit, counted under merchant m2 in ingest and the worker", async () => {
    const r = await pnpmScript('apps/sandbox/src/cli/main.ts', [
      'trigger',
      'payin',
      '--currency',
      'INR',
      '--amount',
      '1000',
      '--merchant',
      'm2',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/credited \(ledger: payin_credit 1000 INR\)/);
    const merchantOrderNo = /registered payin (\S+)/.exec(r.stdout)![1]!;
    const { rows } = await env.db.pool.query('select status, merchant_no from orders where merchant_order_no = $1', [
      merchantOrderNo,
    ]);
    expect(rows).toEqual([{ status: 'credited', merchant_no: 'M100002' }]);

    const written = parseEnv(readFileSync(envFile, 'utf8'));
    const scrape = async (port: string | undefined) => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const [ingest, worker] = [await scrape(written.INGEST_METRICS_PORT), await scrape(written.WORKER_METRICS_PORT)];
    expect(
      metricValue(ingest, 'ingest_callbacks_total', {
        route: '/callbacks/m/:ref/payin',
        outcome: 'success',
        merchant: 'm2',
      }),
    ).toBeGreaterThanOrEqual(1);
    expect(metricValue(ingest, 'ingest_callbacks_total', { merchant: 'm1' })).toBe(0);
    expect(metricValue(worker, 'mcb_worker_jobs_total', { outcome: 'credited', merchant: 'm2' })).toBe(1);
    expect(metricValue(worker, 'mcb_worker_jobs_total', { outcome: 'credited', merchant: 'm1' })).toBe(0);
    expect(metricValue(worker, 'mcb_callback_to_credit_seconds_count', { merchant: 'm2' })).toBe(1);
    // The label's values: the configured refs, nothing else.
    for (const text of [ingest, worker])
      expect(new Set([...text.matchAll(/merchant="([^"]*)"/g)].map((m) => m[1]))).toEqual(new Set(['m1', 'm2']));
  });
});
