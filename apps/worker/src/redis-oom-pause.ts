import { coerceError } from '@mcb/core/errors';
import { createLogThrottle, type Logger } from '@mcb/core/logger';
import type { WorkerMetrics } from './metrics.ts';

/** Longest pause of fetching while Redis refuses with OOM, in ms. */
const MAX_BACKOFF_MS = 30_000;

/**
 * A Redis at maxmemory (noeviction) refuses every BullMQ script with OOM, and BullMQ's fetch loop retries at once,
 * spinning. This pauses fetching instead, for 0.5 s, then twice as long at each refusal (at most 30 s), back to 0.5 s
 * once a job completes; it logs at most one line per 10 s. Jobs in flight still try to complete.
 */
export interface RedisOomPause {
  /** An error of the worker: true when it was an OOM refusal (fetching is paused), false for any other error. */
  refused(error: Error): boolean;
  /** A job completed: Redis takes writes again, the next refusal starts from the shortest pause. */
  completed(): void;
  /** The worker is closing: no resume is pending any more. */
  stop(): void;
}

/** Options of {@link createRedisOomPause}. */
export interface RedisOomPauseOptions {
  /** What is paused and resumed: the worker's fetch loops. */
  fetching: {
    pause(doNotWaitActive?: boolean, holder?: string): Promise<void>;
    resume(holder?: string): Promise<void>;
  };
  logger: Logger;
  metrics?: WorkerMetrics;
}

export function createRedisOomPause({ fetching, logger, metrics }: RedisOomPauseOptions): RedisOomPause {
  let backoffMs = 0;
  let resumeTimer: NodeJS.Timeout | undefined;
  const logThrottled = createLogThrottle(logger);
  return {
    refused(error) {
      if (!/\bOOM\b/.test(coerceError(error).message)) return false;
      metrics?.redisOom.inc();
      if (resumeTimer) return true;
      backoffMs = Math.min(backoffMs ? backoffMs * 2 : 500, MAX_BACKOFF_MS);
      metrics?.redisOomBackoff.set(backoffMs / 1000);
      logThrottled(
        'redis oom',
        'error',
        { err: coerceError(error), backoffMs },
        'Redis is out of memory (maxmemory, noeviction): pausing job fetching',
      );
      void fetching.pause(true, 'redis-oom').catch(() => {});
      resumeTimer = setTimeout(() => {
        resumeTimer = undefined;
        void fetching.resume('redis-oom');
      }, backoffMs);
      resumeTimer.unref();
      return true;
    },
    completed() {
      if (backoffMs === 0) return;
      backoffMs = 0;
      metrics?.redisOomBackoff.set(0);
    },
    stop() {
      clearTimeout(resumeTimer);
    },
  };
}
