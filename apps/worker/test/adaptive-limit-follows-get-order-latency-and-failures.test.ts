import { describe, expect, it } from 'vitest';
import { createAdaptiveLimit, type AdaptiveLimit } from '../src/adaptive-concurrency.ts';

// The limiter on its own, fed windows of Get order samples as the platform guard would report them.

/** One window: `n` samples of `ms` (the last `failed` of them outage-like), with the limit fully in use. */
function window(l: AdaptiveLimit, n: number, ms: number, failed = 0): number {
  while (l.inFlight < l.limit) l.jobStarted();
  while (l.inFlight > l.limit) l.jobEnded();
  for (let i = 0; i < n; i++) l.sample({ ms, ok: i >= failed });
  return l.update();
}

describe('the adaptive limit of jobs in flight', () => {
  it('grows from its start to the ceiling while Get order latency holds, whatever that latency is', () => {
    for (const ms of [1, 200, 1000]) {
      const l = createAdaptiveLimit({ initial: 64, max: 1024 });
      const seen = [l.limit];
      for (let i = 0; i < 40; i++) seen.push(window(l, 50, ms));
      expect(seen.at(-1)).toBe(1024);
      // It grows step by step (at most doubling per window, while full), never jumps to the ceiling at once.
      expect(seen[1]).toBeLessThanOrEqual(128);
      expect(seen[2]).toBeLessThanOrEqual(256);
    }
  });

  it('does not grow a limit that is not in use (fewer than half of it in flight)', () => {
    const l = createAdaptiveLimit({ initial: 64 });
    for (let i = 0; i < 20; i++) {
      l.jobStarted(); // 1..20 in flight, far below 32
      l.sample({ ms: 50, ok: true });
      l.update();
    }
    expect(l.limit).toBe(64);
  });

  it('cuts the limit when Get order slows well beyond its long-run latency, and regrows once the new pace is normal', () => {
    const l = createAdaptiveLimit({ initial: 64, max: 1024 });
    for (let i = 0; i < 12; i++) window(l, 50, 200);
    const before = l.limit;
    expect(before).toBeGreaterThan(500);
    const slowed = window(l, 50, 1200);
    expect(slowed).toBeLessThan(before);
    expect(slowed).toBeGreaterThanOrEqual(Math.floor(before / 2)); // at most halved per window
    let low = slowed;
    for (let i = 0; i < 5; i++) low = Math.min(low, window(l, 50, 1200));
    // The long-run latency catches up with 1,200 ms, and then the limit grows again.
    for (let i = 0; i < 120; i++) window(l, 50, 1200);
    expect(l.limit).toBeGreaterThan(low);
  });

  it('does not take jitter of a fast platform (a few ms) for a slowdown', () => {
    const l = createAdaptiveLimit({ initial: 64, max: 1024 });
    for (let i = 0; i < 30; i++) window(l, 50, i % 2 === 0 ? 1 : 12);
    expect(l.limit).toBe(1024);
  });

  it('halves the limit when more than 10 % of a window are outage-like failures, down to the minimum', () => {
    const l = createAdaptiveLimit({ initial: 256, min: 8 });
    expect(window(l, 20, 100, 1)).toBeGreaterThanOrEqual(256); // 5 %: no cut
    const before = l.limit;
    expect(window(l, 20, 100, 5)).toBe(Math.round(before / 2));
    for (let i = 0; i < 10; i++) window(l, 20, 100, 20);
    expect(l.limit).toBe(8);
  });

  it('holds the minimum while the circuit breaker is open', () => {
    const l = createAdaptiveLimit({ initial: 256, min: 8 });
    l.paused(true);
    expect(window(l, 20, 100)).toBe(8);
    l.paused(false);
    expect(window(l, 20, 100)).toBeGreaterThan(8);
  });

  it('never asks for more jobs than PLATFORM_MAX_RPS can serve (rate × latency, with room for the commit)', () => {
    const l = createAdaptiveLimit({ initial: 64, max: 5000, maxRps: 100 });
    for (let i = 0; i < 60; i++) window(l, 50, 500);
    // 100/s × (0.5 s + 25 ms of noise allowance) × 2 = 105
    expect(l.limit).toBeLessThanOrEqual(105);
    expect(l.limit).toBeGreaterThanOrEqual(100);
  });
});

describe('the adaptive limit on a busy worker', () => {
  it('does not take its own event-loop delay for a slower platform', () => {
    let loopDelay = 0;
    const l = createAdaptiveLimit({ initial: 64, max: 1024, loopDelayMs: () => loopDelay });
    for (let i = 0; i < 10; i++) window(l, 50, 5);
    const before = l.limit;
    // The worker's CPU saturates: every reply is seen 300 ms late, all of it event-loop delay.
    loopDelay = 300;
    expect(window(l, 50, 305)).toBeGreaterThanOrEqual(before);
    // Without the correction the same window would have been cut.
    const uncorrected = createAdaptiveLimit({ initial: 64, max: 1024 });
    for (let i = 0; i < 10; i++) window(uncorrected, 50, 5);
    const uncorrectedBefore = uncorrected.limit;
    expect(window(uncorrected, 50, 305)).toBeLessThan(uncorrectedBefore);
  });
});
