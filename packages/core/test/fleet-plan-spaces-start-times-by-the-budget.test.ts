import { describe, expect, it } from 'vitest';
import { fleetPlan } from '../src/platform/fleet.ts';
import type { RedisClient } from '../src/redis-nodes.ts';
import { merchantKeys } from '@mcb/core/queue';

const redis = {} as RedisClient;

describe('fleetPlan', () => {
  it('spaces start times 1 s / budget apart, with a burst of a fiftieth of the budget and a bounded horizon', () => {
    const plan = fleetPlan({ redis, keys: merchantKeys('p').fleet, maxRps: 100, processId: 'me' });
    expect(plan).toEqual({
      scope: 'all',
      keys: merchantKeys('p').fleet,
      maxRps: 100,
      timeoutMs: 1000,
      probeIntervalMs: 333,
      processId: 'me',
      intervalUs: 10_000,
      toleranceUs: 20_000,
      horizonUs: 50_000,
      staleMs: 25,
    });
  });

  it('reserves at most two intervals ahead when they are longer than 50 ms, and names its scope (a merchant ref)', () => {
    const plan = fleetPlan({
      redis,
      keys: merchantKeys('p', 'm1').fleet,
      scope: 'm1',
      maxRps: 10,
      probesPerSecond: 4,
      redisTimeoutMs: 200,
    });
    expect(plan.keys.budget).toBe('p:platform:m-m1:budget');
    expect(plan).toMatchObject({ intervalUs: 100_000, toleranceUs: 0, horizonUs: 200_000, staleMs: 200 });
    expect(plan).toMatchObject({ timeoutMs: 200, probeIntervalMs: 250 });
    expect(plan.processId).toMatch(/-\d+-[0-9a-f]{6}$/);
  });

  it('has no spacing without a budget', () => {
    expect(fleetPlan({ redis, keys: merchantKeys('p').fleet, maxRps: 0 })).toMatchObject({
      intervalUs: 0,
      toleranceUs: 0,
      horizonUs: 50_000,
    });
  });
});
