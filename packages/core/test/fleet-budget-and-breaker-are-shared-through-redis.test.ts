import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes, type AppError } from '@mcb/core/errors';
import { createFleet, createPlatformClient, guardPlatform, readFleetState, type Fleet } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import {
  MERCHANT_NO,
  platformOrder,
  startFakePlatform,
  startOwnRedis,
  useTestEnv,
  waitFor,
  type FakePlatform,
} from '@mcb/testkit';
import { merchantKeys } from '@mcb/core/queue';

// The fleet's Get order budget and breaker state, shared through real Redis by several "processes" (each its own
// connection and fleet handle, as each process has). The three-worker-process acceptance tests are in test/reliability.

const env = useTestEnv();
let platform: FakePlatform;
const opened: { fleet: Fleet; redis: Redis }[] = [];

beforeAll(async () => {
  platform = await startFakePlatform();
  for (let i = 0; i < 60; i++)
    platform.setOrder(
      platformOrder({ orderNo: `PF${i}`, merchantOrderNo: `F${i}`, type: 'payin', state: 6, amountJson: '10' }),
    );
});
afterEach(async () => {
  for (const { fleet, redis } of opened.splice(0)) {
    await fleet.close();
    redis.disconnect();
  }
});
afterAll(async () => {
  await platform?.close();
});

/** A process's fleet handle on its own connection (the worker's kind: commands wait while Redis is away). */
function fleetOn(url: string, prefix: string, maxRps: number, scope?: string): Fleet {
  const redis = createRedis(url, 'worker');
  redis.on('error', () => undefined);
  const fleet = createFleet({ redis, keys: merchantKeys(prefix, scope).fleet, maxRps, scope, redisTimeoutMs: 300 });
  opened.push({ fleet, redis });
  return fleet;
}

/** The most events in any one-second window. */
function busiestSecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= 1000) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

async function takeMany(fleet: Fleet, n: number, times: number[]): Promise<void> {
  await Promise.all(Array.from({ length: n }, () => fleet.take().then(() => void times.push(performance.now()))));
}

describe('the fleet budget', () => {
  it('lets three processes together start at most the budget (plus its stated burst) in any second, and uses it', async () => {
    const prefix = `${env.prefix}-share`;
    const fleets = [1, 2, 3].map(() => fleetOn(env.redisUrl, prefix, 100));
    const times: number[] = [];
    const started = performance.now();
    await Promise.all(fleets.map((f) => takeMany(f, 100, times)));
    const seconds = (performance.now() - started) / 1000;
    // Burst tolerance (docs/deployment.md): 10 % of the budget, for the burst after a pause and timers' jitter.
    expect(busiestSecond(times)).toBeLessThanOrEqual(110);
    // 300 starts at 100 a second: about 3 s when the budget is used (not 3 × 100 a second; at least 60 % used).
    expect(seconds).toBeGreaterThan(1.9);
    expect(seconds).toBeLessThan(3 / 0.6);
    expect(fleets.map((f) => f.status().alive)).toEqual([3, 3, 3]);
  });

  it('is work-conserving: one busy process gets the whole budget while the others idle', async () => {
    const prefix = `${env.prefix}-idle`;
    const [busy] = [1, 2, 3].map(() => fleetOn(env.redisUrl, prefix, 100));
    const times: number[] = [];
    const started = performance.now();
    await takeMany(busy!, 150, times);
    expect((performance.now() - started) / 1000).toBeLessThan(1.5 / 0.6);
    expect(busiestSecond(times)).toBeLessThanOrEqual(110);
  });

  it('keeps budgets of different scopes apart (a merchant number could have its own)', async () => {
    const prefix = `${env.prefix}-scope`;
    const a = fleetOn(env.redisUrl, prefix, 50, 'm-a');
    const b = fleetOn(env.redisUrl, prefix, 50, 'm-b');
    const times: number[] = [];
    const started = performance.now();
    await Promise.all([takeMany(a, 50, times), takeMany(b, 50, times)]);
    // Each scope's 50 within about a second, side by side: 100 in the busiest second, not 50.
    expect((performance.now() - started) / 1000).toBeLessThan(1.5);
    expect(busiestSecond(times)).toBeGreaterThan(60);
    expect(merchantKeys(prefix, 'm-a').fleet.budget).toBe(`${prefix}:platform:m-m-a:budget`);
  });

  it('keeps each process to its last fair share (budget / processes alive) while Redis cannot be reached', async () => {
    const own = await startOwnRedis([]);
    try {
      const fleets = [1, 2, 3].map(() => fleetOn(own.url, 'fb', 60));
      await Promise.all(fleets.map((f) => f.take()));
      await waitFor(() => fleets.every((f) => f.status().alive === 3), {
        timeoutMs: 5000,
        message: 'the fleets did not see each other',
      });
      await own.kill();
      const times: number[] = [];
      const started = performance.now();
      await takeMany(fleets[0]!, 40, times);
      // 60 / 3 = 20 a second: 40 take about 2 s (at most 20 in any second), not the whole budget's 0.7 s.
      expect(fleets[0]!.status().fallback).toBe(true);
      expect(busiestSecond(times)).toBeLessThanOrEqual(20);
      expect((performance.now() - started) / 1000).toBeGreaterThan(0.95);
    } finally {
      await own.destroy();
    }
  });
});

describe('the fleet breaker', () => {
  it('opens for every process when one sees the outage, probes a few times a second in all, and closes for all', async () => {
    const prefix = `${env.prefix}-breaker`;
    const guards = [1, 2, 3].map(() =>
      guardPlatform(createPlatformClient({ baseUrl: platform.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 }), {
        fleet: fleetOn(env.redisUrl, prefix, 1000),
        failuresToOpen: 3,
        openMs: { initial: 100, max: 100 }, // each process alone would probe 10 times a second
        maxWaitMs: 30_000,
      }),
    );
    try {
      platform.setOutage(503);
      // Only the first process asks: the others learn of the outage from the fleet, without a failure of their own.
      // Its calls sent before its breaker opened fail (the caller's, as ever); the rest wait for the platform.
      const first = Array.from({ length: 5 }, (_, i) =>
        guards[0]!.getOrder(`F${i}`).then(
          (o) => o.merchantOrderNo,
          (e: unknown) => (e as AppError).code,
        ),
      );
      await waitFor(() => guards.every((g) => g.breakerState() === 'open'), {
        timeoutMs: 5000,
        message: 'not every process saw the breaker open',
      });
      const state = await readFleetState(opened[0]!.redis, merchantKeys(prefix).fleet);
      expect(state.breakerOpen).toBe(true);
      const rest = guards
        .slice(1)
        .flatMap((g, k) => Array.from({ length: 5 }, (_, i) => g.getOrder(`F${10 * (k + 1) + i}`)));
      // Two seconds of outage with 15 calls waiting in three processes: the fleet's probes only (3 a second).
      const from = platform.arrivals.length;
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, 2000));
      const probes = platform.arrivals.slice(from).filter((t) => t >= t0);
      expect(probes.length).toBeGreaterThanOrEqual(2);
      expect(probes.length).toBeLessThanOrEqual(8);
      platform.setOutage(undefined);
      // The other processes never sent a request into the outage: every one of their calls is answered.
      const answers = await Promise.all(rest);
      expect(answers.map((o) => o.merchantOrderNo).sort()).toEqual(
        [10, 11, 12, 13, 14, 20, 21, 22, 23, 24].map((i) => `F${i}`),
      );
      const firstOutcomes = await Promise.all(first);
      expect(firstOutcomes.filter((o) => o.startsWith('F')).length).toBeGreaterThanOrEqual(3);
      expect(
        firstOutcomes.filter((o) => !o.startsWith('F')).every((code) => code === ErrorCodes.PLATFORM_HTTP_ERROR),
      ).toBe(true);
      expect(guards.map((g) => g.breakerState())).toEqual(['closed', 'closed', 'closed']);
      expect((await readFleetState(opened[0]!.redis, merchantKeys(prefix).fleet)).breakerOpen).toBe(false);
    } finally {
      platform.setOutage(undefined);
      await Promise.all(guards.map((g) => g.close()));
    }
  }, 20_000);
});
