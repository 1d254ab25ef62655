import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { startReceiver, startSandbox, type Receiver } from './helpers/sandbox.ts';

const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));

let app: FastifyInstance;
let url: string;
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver((n) => (n === 0 ? { status: 200, body: 'SUCCESS' } : { status: 500, body: 'nope' }));
  ({ app, url } = await startSandbox({ payinCallbackUrl: receiver.url, payoutCallbackUrl: receiver.url }));
});
afterAll(async () => {
  await app.close();
  await receiver.close();
});

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], {
      env: { ...process.env, SANDBOX_URL: url },
      timeout: 20_000,
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

describe('pnpm sandbox', () => {
  it('trigger payin creates, releases and prints what the receiver replied', async () => {
    const r = await cli(
      'trigger',
      'payin',
      '--unregistered',
      '--currency',
      'INR',
      '--amount',
      '1000',
      '--merchant-order-no',
      'CLI-1',
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/sandbox order PI\w+ moved to state 6/);
    expect(r.stdout).toMatch(/payin PI\w+ \(merchant order CLI-1\): 1000 INR, state 6/);
    expect(r.stdout).toMatch(/attempt 1 at .*: 200 "SUCCESS" → success/);
    expect(receiver.received[0]!.parsed).toMatchObject({ MerchantOrderNo: 'CLI-1', OrderState: 6, FiatCurrency: 1000 });
  });

  it('trigger payout --console says no callback is sent', async () => {
    const r = await cli(
      'trigger',
      'payout',
      '--unregistered',
      '--currency',
      'BRL',
      '--amount',
      '10.00',
      '--state',
      '5',
      '--console',
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/state 5, created via console/);
    expect(r.stdout).toMatch(/no callback/);
  });

  it('trigger payout --wait exits 1 when the receiver never accepts', async () => {
    const r = await cli(
      'trigger',
      'payout',
      '--unregistered',
      '--currency',
      'INR',
      '--amount',
      '5',
      '--wait',
      '--json',
    );
    expect(r.code).toBe(1);
    const view = JSON.parse(r.stdout);
    expect(view.deliveries[0].status).toBe('gave-up');
    expect(view.deliveries[0].attempts).toHaveLength(5);
  });

  it('trigger payout --forge forges the other final state (a payout record has no amount to forge)', async () => {
    const r = await cli(
      'trigger',
      'payout',
      '--unregistered',
      '--currency',
      'INR',
      '--amount',
      '7',
      '--state',
      '4',
      '--forge',
      '--merchant-order-no',
      'CLI-FORGE',
    );
    expect(r.stderr).not.toMatch(/carries no amount/);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/sent a forged callback \(the other final state\) for the same order/);
    // The sandbox holds the genuine delivery (state 4) and the forged one (state 5).
    const res = await app.inject({ method: 'GET', url: '/control/orders/CLI-FORGE' });
    expect(res.statusCode, res.body).toBe(200);
    const deliveries = (res.json() as { deliveries: { event: string; state: number }[] }).deliveries;
    expect(deliveries.map((d) => [d.event, d.state]).sort()).toEqual([
      ['forged', 5],
      ['genuine', 4],
    ]);
  });

  it('reports refusals and usage errors with a non-zero status', async () => {
    const unregistered = await cli('trigger', 'payin', '--amount', '1');
    expect(unregistered.code).toBe(1);
    expect(unregistered.stderr).toMatch(/CONSOLE_TOKEN is unset: start the stack with `pnpm dev`.*--unregistered/);
    const bad = await cli('trigger', 'payin', '--unregistered', '--currency', 'EUR', '--amount', '1');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/sandbox answered 400: currency "EUR" is not enabled/);
    expect((await cli('trigger', 'refund')).code).toBe(2);
    const down = await run(process.execPath, [CLI, 'reset'], {
      env: { ...process.env, SANDBOX_URL: 'http://127.0.0.1:9' },
    }).catch((e) => e);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot reach the sandbox/);
  });

  it('--help after a command prints the usage and exits 0 (it once answered "trigger what?" and 2)', async () => {
    for (const args of [['trigger', '--help'], ['trigger', 'payin', '--help'], ['order', '-h'], ['--help']]) {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toMatch(/^usage:\n {2}pnpm sandbox trigger payin/);
      expect(r.stderr, args.join(' ')).toBe('');
    }
  });
});
