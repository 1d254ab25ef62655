import { setTimeout as delay } from 'node:timers/promises';

/** Spaces out requests: at most `ratePerSecond` starts per second, evenly (no bursts). */
export interface RateLimiter {
  /** Resolves when the caller may start its next request; rejects with the signal's reason when it aborts. */
  take(signal?: AbortSignal): Promise<void>;
}

/**
 * An interval limiter: each `take()` reserves the next free slot, `1000 / ratePerSecond` ms after the previous one.
 * A token bucket without a burst allowance: the platform sees a steady trickle, never a spike after an idle spell.
 */
export function createRateLimiter(
  ratePerSecond: number,
  now: () => number = performance.now.bind(performance),
): RateLimiter {
  if (!(Number.isFinite(ratePerSecond) && ratePerSecond > 0))
    throw new RangeError('ratePerSecond must be a positive number');
  const intervalMs = 1000 / ratePerSecond;
  let nextSlot = -Infinity;
  return {
    async take(signal) {
      signal?.throwIfAborted();
      const t = now();
      const slot = Math.max(t, nextSlot);
      nextSlot = slot + intervalMs;
      if (slot > t) await delay(slot - t, undefined, { signal });
    },
  };
}
