import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { MAX_ATTEMPTS, RETRY_GAPS_MS } from '../src/app.ts';
import { startReceiver, startSandbox, type Receiver } from './helpers/sandbox.ts';

describe('retry schedule', () => {
  let app: FastifyInstance | undefined;
  let receiver: Receiver | undefined;
  afterEach(async () => {
    await app?.close();
    await receiver?.close();
  });

  it('makes at most 5 attempts, 3, 9, 27 and 81 scaled minutes apart, then gives up', async () => {
    const scale = 3000; // 3 min → 60 ms … 81 min → 1620 ms
    ({ app } = await startSandbox({ timeScale: scale }));
    receiver = await startReceiver(() => ({ status: 503, body: 'busy' }));
    const sim = app.sandbox;
    const gaveUp: string[] = [];
    sim.events.on('gave-up', (d: { id: string }) => gaveUp.push(d.id));
    const order = sim.createPayout({ currency: 'BRL', amount: '10.00', callbackUrl: receiver.url });
    const d = sim.finalize(order.orderNo, 4).deliveries[0]!;
    const settled = await sim.settled(d);

    expect(settled.status).toBe('gave-up');
    expect(gaveUp).toEqual([d.id]);
    expect(settled.attempts.map((a) => a.number)).toEqual([1, 2, 3, 4, 5]);
    expect(receiver.received).toHaveLength(MAX_ATTEMPTS);
    expect(MAX_ATTEMPTS).toBe(5);
    expect(RETRY_GAPS_MS).toEqual([180_000, 540_000, 1_620_000, 4_860_000]);

    // Gaps between the recorded send times, in real ms; each is at least its scaled value, never much more.
    const at = settled.attempts.map((a) => Date.parse(a.at));
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    gaps.forEach((gap, i) => {
      const expected = RETRY_GAPS_MS[i]! / scale;
      expect(gap).toBeGreaterThanOrEqual(expected - 2);
      expect(gap).toBeLessThan(expected + 400);
    });
    // The ratio 3:9:27:81 shows as each gap being about three times the previous one.
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]! / gaps[i - 1]!).toBeGreaterThan(2);

    // Nothing more is sent after the fifth failure.
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received).toHaveLength(5);
  });

  it('sends the first attempt after the configured delay, scaled, and refuses one beyond 30 s', async () => {
    ({ app } = await startSandbox({ timeScale: 100, firstAttemptDelayMs: 20_000 }));
    receiver = await startReceiver();
    const sim = app.sandbox;
    const order = sim.createPayin({ currency: 'INR', amount: '1', callbackUrl: receiver.url });
    const finalizedAt = Date.now();
    const d = sim.finalize(order.orderNo, 6).deliveries[0]!;
    expect(d.status).toBe('scheduled');
    expect(Date.parse(d.nextAttemptAt!) - finalizedAt).toBeGreaterThanOrEqual(190);
    await sim.settled(d);
    expect(receiver.received[0]!.at - finalizedAt).toBeGreaterThanOrEqual(195);

    await expect(startSandbox({ firstAttemptDelayMs: 30_001 })).rejects.toThrow(/firstAttemptDelayMs/);
  });
});
