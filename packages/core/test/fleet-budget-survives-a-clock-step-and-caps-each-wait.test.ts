import { afterEach, describe, expect, it } from 'vitest';
import { metricValue, Registry } from '@mcb/core/metrics';
import { createFleet, type Fleet } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { fleetPlan } from '../src/platform/fleet.ts';
import type { FleetLink } from '../src/platform/fleet-link.ts';
import { createFleetQueue, MAX_WAIT_MS } from '../src/platform/fleet-queue.ts';
import type { ReserveReply } from '../src/platform/fleet-script.ts';
import { merchantKeys } from '@mcb/core/queue';

// Issue 48: a budget timestamp written under a faster clock (a Sentinel failover to a replica whose clock is behind,
// an NTP step back on the Redis host) made every Get order of the fleet wait for the difference. The script clamps
// it with Redis's TIME, and no wait of the pump is longer than MAX_WAIT_MS whatever the budget says.

const env = useTestEnv();
const opened: { fleet: Fleet; redis: Redis }[] = [];
afterEach(async () => {
  for (const { fleet, redis } of opened.splice(0)) {
    await fleet.close();
    redis.disconnect();
  }
});

function fleetOn(prefix: string, maxRps: number, registry?: Registry): { fleet: Fleet; redis: Redis } {
  const redis = createRedis(env.redisUrl, 'worker');
  redis.on('error', () => undefined);
  const fleet = createFleet({ redis, keys: merchantKeys(prefix).fleet, maxRps, registry });
  opened.push({ fleet, redis });
  return { fleet, redis };
}

/** Redis's clock, in µs. */
async function redisNowUs(redis: Redis): Promise<number> {
  const [sec, usec] = (await redis.time()).map(Number) as [number, number];
  return sec * 1_000_000 + usec;
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

describe('a budget timestamp ahead of Redis clock', () => {
  it('120 s ahead costs at most one capped wait; then Get orders flow at the budget rate, and the clamp is counted', async () => {
    const prefix = `${env.prefix}-ahead`;
    const registry = new Registry();
    const { fleet, redis } = fleetOn(prefix, 50, registry);
    const { budget } = merchantKeys(prefix).fleet;
    // 1. Written straight into the budget key, as a clock 120 s faster would have left it.
    await redis.hset(budget, 'tat', String((await redisNowUs(redis)) + 120_000_000));
    // 2. 50 Get orders at 50 a second: about a second, plus at most one capped wait (before: 120 s).
    const times: number[] = [];
    let done = 0;
    const started = performance.now();
    for (let i = 0; i < 50; i++)
      void fleet.take().then(
        () => {
          times.push(performance.now());
          done++;
        },
        () => undefined,
      );
    await waitFor(() => done === 50, { timeoutMs: 8000, message: 'the Get orders waited for the clock' });
    expect((performance.now() - started) / 1000).toBeLessThan(1 + MAX_WAIT_MS / 1000 + 3);
    // 3. At the budget's rate: the clamp is no burst (50 a second plus the stated 10 %).
    expect(busiestSecond(times)).toBeLessThanOrEqual(55);
    const plan = fleetPlan({ redis, keys: merchantKeys(prefix).fleet, maxRps: 50 });
    const tat = Number(await redis.hget(budget, 'tat'));
    expect(tat - (await redisNowUs(redis))).toBeLessThanOrEqual(plan.horizonUs + plan.toleranceUs + plan.intervalUs);
    expect(metricValue(await registry.metrics(), 'mcb_platform_budget_clock_clamps_total')).toBe(1);
  });

  it('does not keep a waiting process asleep after the budget key is deleted', async () => {
    const prefix = `${env.prefix}-deleted`;
    const { fleet, redis } = fleetOn(prefix, 50);
    const { budget } = merchantKeys(prefix).fleet;
    await redis.hset(budget, 'tat', String((await redisNowUs(redis)) + 120_000_000));
    let started = false;
    void fleet.take().then(
      () => (started = true),
      () => undefined,
    );
    // Before issue 48 the script refused (and marked the budget throttled) and the process slept 120 s: deleting the
    // key did not wake it.
    await waitFor(async () => started || (await redis.hexists(budget, 'throttled')) === 1, { timeoutMs: 5000 });
    await redis.del(budget);
    await waitFor(() => started, { timeoutMs: MAX_WAIT_MS + 4000, message: 'the Get order still waits' });
  });
});

describe("the pump's waits", () => {
  it('are capped: told to ask again in 120 s (a budget state that is wrong), the process asks again within the cap', async () => {
    const asked: number[] = [];
    const reply = (r: Partial<ReserveReply>): ReserveReply => ({
      retryMs: 0,
      alive: 1,
      breakerOpen: false,
      throttled: false,
      clamped: false,
      delaysMs: [],
      ...r,
    });
    // A link whose budget says "in 120 s" once, then grants: the first answer as the script gave it before it clamped.
    const link = {
      state: { alive: 1, fallback: false, sharedOpen: false, reportSeq: 0, closed: false },
      reserve: async () => {
        asked.push(performance.now());
        return asked.length === 1 ? reply({ retryMs: 120_000, throttled: true }) : reply({ delaysMs: [0] });
      },
      enterFallback: () => undefined,
    } as unknown as FleetLink;
    const queue = createFleetQueue(
      link,
      fleetPlan({ redis: {} as never, keys: merchantKeys('p').fleet, maxRps: 50 }),
      undefined,
    );
    let started = false;
    void queue.take().then(
      () => (started = true),
      () => undefined,
    );
    await waitFor(() => started, { timeoutMs: MAX_WAIT_MS + 4000, message: 'the pump slept on the 120 s' });
    expect(asked).toHaveLength(2);
    expect(asked[1]! - asked[0]!).toBeGreaterThanOrEqual(MAX_WAIT_MS - 5);
    queue.failAll(() => new Error('done'));
    link.state.closed = true;
  });
});
