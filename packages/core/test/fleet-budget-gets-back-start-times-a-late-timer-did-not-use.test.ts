import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCodes, type AppError } from '@mcb/core/errors';
import { metricValue, Registry } from '@mcb/core/metrics';
import { createFleet, fleetKeys, type Fleet } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { fleetPlan } from '../src/platform/fleet.ts';
import { createFleetLink } from '../src/platform/fleet-link.ts';

// Issue 48: a start time whose timer fires late (a busy event loop) is not used, so as not to bunch with the fleet's
// next ones; it used to be lost to the fleet as well. It is given back with the next reservation, which moves the
// budget's timestamp back one interval for each (never before now). How much of the budget a busy process and the
// fleet then use is timing, measured by `node bench/fleet-budget.ts` (docs/deployment.md), not here.

const env = useTestEnv();
const redises: Redis[] = [];
const fleets: Fleet[] = [];
afterEach(async () => {
  for (const f of fleets.splice(0)) await f.close();
  for (const r of redises.splice(0)) r.disconnect();
});

function connect(): Redis {
  const redis = createRedis(env.redisUrl, 'worker');
  redis.on('error', () => undefined);
  redises.push(redis);
  return redis;
}

async function redisNowUs(redis: Redis): Promise<number> {
  const [sec, usec] = (await redis.time()).map(Number) as [number, number];
  return sec * 1_000_000 + usec;
}

/** Hold the event loop for `ms`, as CPU-bound work beside the requests does: every timer due meanwhile fires late. */
function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('start times given back', () => {
  it('move the budget timestamp back one interval each, never before now', async () => {
    const prefix = `${env.prefix}-script`;
    const redis = connect();
    // 1 a second: start times 1 s apart, reserved up to 2 s ahead, no burst.
    const link = createFleetLink(redis, fleetPlan({ redis, prefix, maxRps: 1, processId: 'p1' }), undefined, undefined);
    const { budget } = fleetKeys(prefix);
    const lease = await link.reserve(3);
    expect(lease.delaysMs.map((ms) => Math.round(ms / 1000))).toEqual([0, 1, 2]);
    const tat = Number(await redis.hget(budget, 'tat'));
    // 1. Two of the three given back (their timers fired late): the next start time is 1 s on, not 3 s.
    const back = await link.reserve(0, 2);
    expect(back.delaysMs).toEqual([]);
    expect(Number(await redis.hget(budget, 'tat'))).toBe(tat - 2_000_000);
    // 2. More than were reserved ahead: the timestamp stops at now (no credit for time that has passed).
    await link.reserve(0, 50);
    const now = await redisNowUs(redis);
    const after = Number(await redis.hget(budget, 'tat'));
    expect(after).toBeLessThanOrEqual(now);
    expect(after).toBeGreaterThan(now - 1_000_000);
  });

  it('a busy event loop fires start times late: they are given back and their requests start all the same', async () => {
    const prefix = `${env.prefix}-late`;
    const registry = new Registry();
    const fleet = createFleet({ redis: connect(), prefix, maxRps: 100, registry });
    fleets.push(fleet);
    // 100 a second with a burst of 2. The first request is leased alone (the pump starts on it); the other 7 together:
    // at most 3 of them start at once, the others on timers up to 50 ms on. The first of the 7 to start holds the
    // event loop (its lease's timers are set by then) for longer than any of them may be late.
    let started = 0;
    const first = fleet.take();
    const rest = Array.from({ length: 7 }, () =>
      fleet.take().then(() => {
        if (++started === 1) spin(150);
      }),
    );
    await first;
    await waitFor(() => started === 7, { timeoutMs: 10_000, message: 'the late requests did not start' });
    await Promise.all(rest);
    const text = await registry.metrics();
    expect(metricValue(text, 'mcb_platform_budget_given_back_total')).toBeGreaterThan(0);
    expect(metricValue(text, 'mcb_platform_budget_granted_total', { mode: 'fleet' })).toBe(8);
  });

  it('a start time that fires late after close() fails its request instead of leaving it waiting', async () => {
    const fleet = createFleet({ redis: connect(), prefix: `${env.prefix}-closed`, maxRps: 100 });
    const outcomes: string[] = [];
    const first = fleet.take();
    const rest = Array.from({ length: 7 }, () =>
      fleet.take().then(
        () => {
          // As above; closed meanwhile (its requests on timers are not in line: close() cannot fail them).
          if (outcomes.push('started') === 1) {
            void fleet.close();
            spin(150);
          }
        },
        (e: unknown) => void outcomes.push((e as AppError).code),
      ),
    );
    await first;
    await waitFor(() => outcomes.length === 7, { timeoutMs: 5000, message: 'a request was left waiting' });
    await Promise.all(rest);
    expect(outcomes.filter((o) => o !== 'started').every((o) => o === ErrorCodes.PLATFORM_ABORTED)).toBe(true);
    expect(outcomes.filter((o) => o === ErrorCodes.PLATFORM_ABORTED).length).toBeGreaterThan(0);
  });
});
