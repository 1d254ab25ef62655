import { describe, expect, it } from 'vitest';
import { callbackBackoffDelay, callbackRetryWindow, describeWindow } from '../src/index.ts';

/** A seeded generator (mulberry32): the simulation below is the same on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('the retry window CALLBACK_JOB_ATTEMPTS gives', () => {
  it('60 attempts (the default): about 8.2 hours on average, 8.45 hours at most', () => {
    const w = callbackRetryWindow(60);
    expect(w.expectedMs / 3_600_000).toBeCloseTo(8.21, 2);
    expect(w.maxMs / 3_600_000).toBeCloseTo(8.45, 2);
    expect(describeWindow(w.expectedMs)).toBe('8.2 hours');
  });

  it('agrees with the backoff it describes: the mean of 2,000 simulated jobs is within 1 %', () => {
    for (const attempts of [10, 20, 60]) {
      const random = seeded(attempts);
      let total = 0;
      for (let job = 0; job < 2000; job++)
        for (let made = 1; made < attempts; made++) total += callbackBackoffDelay(made, { random });
      const mean = total / 2000;
      const { expectedMs, maxMs } = callbackRetryWindow(attempts);
      expect(Math.abs(mean - expectedMs) / expectedMs).toBeLessThan(0.01);
      expect(mean).toBeLessThan(maxMs);
    }
  });

  it('one attempt has no retry; small budgets are minutes', () => {
    expect(callbackRetryWindow(1)).toEqual({ expectedMs: 0, maxMs: 0 });
    expect(describeWindow(callbackRetryWindow(10).expectedMs)).toBe('4 minutes');
    expect(describeWindow(callbackRetryWindow(20).expectedMs)).toBe('1.5 hours');
  });
});
