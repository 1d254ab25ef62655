import { callbackBackoffDelay, type BackoffOptions } from './retry-policy.ts';

/** How long a job's retries last, from its first failure to its last attempt. */
export interface RetryWindow {
  /** The mean (the backoff draws each delay at random). */
  expectedMs: number;
  /** The longest possible: every delay drawn at its maximum. */
  maxMs: number;
}

/**
 * The retry window that `attempts` (CALLBACK_JOB_ATTEMPTS) give under {@link callbackBackoffDelay}: the sum of the
 * `attempts - 1` delays between them. Each delay is `min(cap, U * base * 2^(n-1))` with U uniform in [0, 1): its mean
 * is `M / 2` while `M = base * 2^(n-1)` is at most the cap, else `cap - cap² / (2M)`. What the docs and the replay
 * pages quote (60 attempts: 8.2 h on average, 8.45 h at most).
 */
export function callbackRetryWindow(attempts: number, options: Omit<BackoffOptions, 'random'> = {}): RetryWindow {
  const base = options.baseMs ?? 1000;
  const cap = options.capMs ?? 600_000;
  let expectedMs = 0;
  let maxMs = 0;
  for (let made = 1; made < attempts; made++) {
    const m = base * 2 ** Math.min(made - 1, 40);
    expectedMs += m <= cap ? m / 2 : cap - (cap * cap) / (2 * m);
    maxMs += callbackBackoffDelay(made, { ...options, random: () => 1 });
  }
  return { expectedMs: Math.round(expectedMs), maxMs };
}

/** A window in words: `8.2 hours`, `4 minutes`, `40 seconds`. */
export function describeWindow(ms: number): string {
  if (ms >= 5_400_000) return `${(ms / 3_600_000).toFixed(1)} hours`;
  if (ms >= 90_000) return `${Math.round(ms / 60_000)} minutes`;
  return `${Math.round(ms / 1000)} seconds`;
}
