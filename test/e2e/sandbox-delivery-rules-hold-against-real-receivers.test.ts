import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPair } from '@mcb/core/callback';
import { createLogger } from '@mcb/core/logger';
import { useTestEnv } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp as buildSandbox, RETRY_GAPS_MS, type Delivery } from '../../apps/sandbox/src/app.ts';
import { MERCHANT_NO, startPipeline, type Pipeline } from './helpers/pipeline.ts';

const TIME_SCALE = 6000; // 3, 9, 27, 81 minutes → 30, 90, 270, 810 ms

/** A receiver that answers each request with the next reply of `replies` (the last one repeats). */
async function receiver(
  replies: { status: number; body: string }[],
): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const reply = replies[Math.min(hits, replies.length - 1)]!;
      hits++;
      res.writeHead(reply.status, { 'content-type': 'text/plain' });
      res.end(reply.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/callbacks`,
    hits: () => hits,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Gaps between the starts of consecutive attempts, in real ms. */
function gaps(d: Delivery): number[] {
  const starts = d.attempts.map((a) => Date.parse(a.at));
  return starts.slice(1).map((t, i) => t - starts[i]!);
}

// The sandbox's delivery rules (spec: "Reply the receiver must give", "Retry schedule"), proven against the real
// ingest and against small receivers that answer what ingest never would.
describe('sandbox delivery rules hold against real receivers', () => {
  const env = useTestEnv();
  let p: Pipeline;

  beforeAll(async () => {
    p = await startPipeline(env, { timeScale: TIME_SCALE });
  });
  afterAll(async () => {
    await p?.close();
  });

  it("ingest's reply `success` ends delivery after one attempt", async () => {
    await p.registerPayin('E2E-RULE-OK', '12.34');
    const order = p.sim.createPayin({ merchantOrderNo: 'E2E-RULE-OK', currency: 'INR', amount: '12.34' });
    const d = await p.sim.settled(p.sim.finalize(order.orderNo, 6).deliveries[0]!);
    expect(d.status).toBe('delivered');
    expect(d.attempts).toHaveLength(1);
    expect(d.attempts[0]).toMatchObject({ number: 1, status: 200, bodySnippet: 'success', outcome: 'success' });
  });

  it('`success\\n` is a failure: the platform retries on the scaled schedule and stops after 5 attempts', async () => {
    const r = await receiver([{ status: 200, body: 'success\n' }]);
    try {
      const order = p.sim.createPayin({ currency: 'INR', amount: '5.00', callbackUrl: r.url });
      const d = await p.sim.settled(p.sim.finalize(order.orderNo, 6).deliveries[0]!);
      expect(d.status).toBe('gave-up');
      expect(d.attempts.map((a) => [a.number, a.outcome, a.error])).toEqual(
        [1, 2, 3, 4, 5].map((n) => [n, 'failure', 'body not accepted']),
      );
      expect(r.hits()).toBe(5);
      // Each gap is at least the spec's gap divided by the time scale (timers never fire early).
      gaps(d).forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(RETRY_GAPS_MS[i]! / TIME_SCALE - 2));
      expect(d.nextAttemptAt).toBeNull();
    } finally {
      await r.close();
    }
  });

  it('non-2xx replies are retried even with a `success` body; the first 2xx `success` ends delivery', async () => {
    const r = await receiver([
      { status: 500, body: 'success' },
      { status: 302, body: 'success' },
      { status: 200, body: 'success' },
    ]);
    try {
      const order = p.sim.createPayout({ currency: 'INR', amount: '5.00', callbackUrl: r.url });
      const d = await p.sim.settled(p.sim.finalize(order.orderNo, 4).deliveries[0]!);
      expect(d.status).toBe('delivered');
      expect(d.attempts.map((a) => [a.status, a.outcome])).toEqual([
        [500, 'failure'],
        [302, 'failure'],
        [200, 'success'],
      ]);
      expect(r.hits()).toBe(3);
    } finally {
      await r.close();
    }
  });

  it('`OK` and `{"code":200}` count as success; `{"code":"200"}` and ` ok` do not', async () => {
    for (const [body, ok] of [
      ['OK', true],
      ['{"code":200}', true],
      ['{"code":"200"}', false],
      [' ok', false],
    ] as const) {
      const r = await receiver([
        { status: 200, body },
        { status: 200, body: 'ok' },
      ]);
      try {
        const order = p.sim.createPayin({ currency: 'INR', amount: '5.00', callbackUrl: r.url });
        const d = await p.sim.settled(p.sim.finalize(order.orderNo, 6).deliveries[0]!);
        expect(d.status, body).toBe('delivered');
        expect(d.attempts[0]?.outcome, body).toBe(ok ? 'success' : 'failure');
        expect(d.attempts, body).toHaveLength(ok ? 1 : 2);
      } finally {
        await r.close();
      }
    }
  });

  it("ingest's `400 fail` (a record it cannot decrypt) is retried 5 times, then the platform gives up; nothing is queued", async () => {
    // A platform holding another merchant's public key: every attempt fails to decrypt at our ingest.
    const other = await buildSandbox({
      merchantNo: MERCHANT_NO,
      merchantPublicKeyPem: generateKeyPair(2048).publicKeyPem,
      timeScale: TIME_SCALE,
      payinCallbackUrl: `${p.ingestUrl}/callbacks/payin`,
      logger: createLogger({ name: 'e2e-other-sandbox', level: 'silent' }),
    });
    try {
      const order = other.sandbox.createPayin({ currency: 'INR', amount: '5.00' });
      const d = await other.sandbox.settled(other.sandbox.finalize(order.orderNo, 6).deliveries[0]!);
      expect(d.status).toBe('gave-up');
      expect(d.attempts.map((a) => [a.status, a.bodySnippet, a.error])).toEqual(
        [1, 2, 3, 4, 5].map(() => [400, 'fail', 'status 400']),
      );
      expect(await p.queue.getJob(`payin-${order.orderNo}-6`)).toBeUndefined();
    } finally {
      await other.close();
    }
  });
});
