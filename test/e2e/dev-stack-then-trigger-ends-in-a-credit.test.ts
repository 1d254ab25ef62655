import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseEnv, promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniquePrefix, useTestEnv, waitFor } from '@mcb/testkit';
import { GENERATED_MARKER } from '../../scripts/lib/env-file.ts';

// README's first hour, as a new user walks it: `pnpm dev` is up; in another shell, with nothing exported,
// `pnpm cli methods --currency INR` prints the INR methods and `pnpm sandbox trigger ...` ends in a credit or a
// refund. The other shell's settings come from the .env file `pnpm dev` wrote (here a temp file via MCB_ENV_FILE,
// so the checkout's own .env is never touched). It starts after a `pnpm demo` left its .env behind (the demo's time
// scale, and a port that is taken now): `pnpm dev --free-ports` runs on its own settings all the same, and Ctrl-C at
// the end stops it cleanly, as pnpm runs it.
const ROOT = resolve(import.meta.dirname, '../..');
const env = useTestEnv();
const dir = mkdtempSync(join(tmpdir(), 'mcb-dev-walk-'));
const envFile = join(dir, '.env');
let dev: ChildProcess;
let devOut = '';
let held: Server;
let heldPort = 0;

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
  // What `pnpm demo` left: its own .env, with a port something else holds now.
  held = createServer();
  await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
  heldPort = (held.address() as AddressInfo).port;
  writeFileSync(
    envFile,
    `${GENERATED_MARKER}\nQUEUE_PREFIX=mcb-demo\nSANDBOX_TIME_SCALE=600\nINGEST_PORT=${heldPort}\nSANDBOX_URL=http://127.0.0.1:${heldPort}\nINGEST_ALLOW_VOLATILE_REDIS=true\n`,
    { mode: 0o600 },
  );
  // As a person runs it: pnpm, in its own process group (a terminal's Ctrl-C signals the whole group).
  dev = spawn('pnpm', ['dev', '--free-ports'], {
    cwd: ROOT,
    detached: true,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      MCB_ENV_FILE: envFile,
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      QUEUE_PREFIX: uniquePrefix('devwalk'),
      KEYS_DIR: join(dir, 'keys'),
      LOG_LEVEL: 'info',
    },
  });
  dev.stdout!.on('data', (c) => (devOut += String(c)));
  dev.stderr!.on('data', (c) => (devOut += String(c)));
  await waitFor(() => devOut.includes('all four apps are up') || dev.exitCode !== null, {
    timeoutMs: 60_000,
    message: 'pnpm dev did not come up',
  }).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}; its output:\n${devOut}`);
  });
  if (dev.exitCode !== null) throw new Error(`pnpm dev exited ${dev.exitCode}:\n${devOut}`);
}, 90_000);

afterAll(async () => {
  if (dev && dev.exitCode === null && dev.signalCode === null) {
    const exited = new Promise((r) => dev.once('exit', r));
    process.kill(-dev.pid!, 'SIGTERM');
    await exited;
  }
  await new Promise((r) => held?.close(r));
  rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe('the first hour: pnpm dev, then commands in another shell', () => {
  it('pnpm dev rewrote the .env the demo left with its own settings (mode 0600), and no loosening in it', () => {
    expect(devOut).toContain(`wrote ${envFile}`);
    expect(statSync(envFile).mode & 0o777).toBe(0o600);
    const written = parseEnv(readFileSync(envFile, 'utf8'));
    expect(written.SANDBOX_TIME_SCALE).toBe('60');
    expect(written.INGEST_PORT).not.toBe(String(heldPort));
    expect(Object.keys(written)).not.toContain('INGEST_ALLOW_VOLATILE_REDIS');
    expect(Object.keys(written)).not.toContain('PLATFORM_ALLOW_HTTP');
  });

  it("runs on its own settings, not the demo's: time scale 60, free ports; the banner asks to export nothing", () => {
    expect(devOut).toMatch(
      /sandbox +http:\/\/127\.0\.0\.1:\d+ +time scale 60 +try: pnpm sandbox trigger payin --currency INR --amount 1000$/m,
    );
    expect(devOut).not.toMatch(/SANDBOX_URL=/);
  });

  it("pnpm dev prints the apps' logs through pino-pretty, prefixed by app, not as raw JSON", () => {
    expect(devOut).toMatch(/^\[ingest\] +\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO \(ingest\): /m);
    expect(devOut).not.toMatch(/^\[\w+\] +\{"level"/m);
  });

  it('pnpm cli methods --currency INR prints the INR methods', async () => {
    const r = await pnpmScript('apps/console/src/cli/main.ts', ['methods', '--currency', 'INR']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^INR {2}₹ {2}2 decimals/m);
  });

  it('pnpm sandbox trigger payin registers, delivers and ends credited (exit 0)', async () => {
    const r = await pnpmScript('apps/sandbox/src/cli/main.ts', [
      'trigger',
      'payin',
      '--currency',
      'INR',
      '--amount',
      '1000',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/registered payin (\S+) \(1000 INR\) with our console/);
    expect(r.stdout).toMatch(/callback delivered: 200 "success"/);
    expect(r.stdout).toMatch(/credited \(ledger: payin_credit 1000 INR\)/);
    const merchantOrderNo = /registered payin (\S+)/.exec(r.stdout)![1]!;
    const { rows } = await env.db.pool.query('select status from orders where merchant_order_no = $1', [
      merchantOrderNo,
    ]);
    expect(rows[0]?.status).toBe('credited');
  });

  it('pnpm sandbox trigger payout --state 5 registers a catalog-valid payout and ends refused with the refund (exit 0)', async () => {
    const r = await pnpmScript('apps/sandbox/src/cli/main.ts', [
      'trigger',
      'payout',
      '--currency',
      'INR',
      '--amount',
      '500',
      '--state',
      '5',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/refused \(ledger: payout_refund 500 INR\)/);
  });

  it('a forged callback beside the genuine one pays nothing: the order is credited once, with the amount Get order confirmed', async () => {
    const r = await pnpmScript('apps/sandbox/src/cli/main.ts', ['trigger', 'payin', '--amount', '250', '--forge']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/forged callback \S+ \[forged\]: delivered/);
    expect(r.stdout).toMatch(/credited \(ledger: payin_credit 250 INR\)$/m);
  });

  it('exits 1, saying why, when the order does not end as expected', async () => {
    const r = await pnpmScript('apps/sandbox/src/cli/main.ts', [
      'trigger',
      'payin',
      '--amount',
      '100',
      '--state',
      '3',
      '--timeout',
      '3s',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/still pending after 3s|expected credited/);
  });

  it('Ctrl-C stops every app and pnpm reports no failure (no ELIFECYCLE)', async () => {
    // 'close', not 'exit': dev's last lines may still be in the pipe when it exits.
    const exited = new Promise<number | null>((r) => dev.once('close', (code) => r(code)));
    // A terminal's Ctrl-C: SIGINT to the whole process group (pnpm, dev, the apps); pnpm forwards it to dev once more.
    process.kill(-dev.pid!, 'SIGINT');
    expect(await exited).toBe(0);
    expect(devOut).toMatch(/dev: stopping console, worker, ingest, sandbox/);
    expect(devOut).not.toMatch(/ELIFECYCLE|Command failed/);
    // One line per request log (they were eight each: the dev log grew 8,400 lines in 7 minutes).
    expect(devOut).toMatch(/^\[console\] +\[[\d:.]+\] INFO \(console\): (incoming request|request completed) \{/m);
    expect(devOut).not.toMatch(/^\[\w+\] +(req|res): \{/m);
  }, 30_000);
});
