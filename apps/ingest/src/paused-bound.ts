/**
 * A paused merchant's backlog bound (docs/merchants.md "Pausing a merchant"): while a merchant is paused its callbacks
 * are still acknowledged and stored, but past MERCHANT_PAUSED_MAX_BACKLOG jobs in its queue its new ones get
 * `503 fail` (the platform retries them), so one long pause cannot eat the Redis headroom of the others. Ingest has
 * no Postgres: it reads the pause's Redis mirror (written by the console, rebuilt by every worker from
 * merchant_pauses) and the queue's depth in one round trip, at most once a second per merchant. A merchant whose
 * mirror is absent (running) is never refused by it.
 */
import { coerceError } from '@mcb/core/errors';
import { createLogThrottle, type Logger } from '@mcb/core/logger';
import { merchantKeys, readPausedBacklog } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';
import type { IngestMetrics } from './metrics.ts';

/** How long one read of a merchant's pause and depth is used, in ms. */
export const PAUSED_BOUND_CACHE_MS = 1000;

/** The bound, asked once per callback after it was opened and checked. */
export interface PausedBound {
  /** Whether merchant `ref`'s new callbacks are refused now (paused, and its backlog at or past the bound). */
  refuses(ref: string): Promise<boolean>;
}

/** Options of {@link createPausedBound}. */
export interface PausedBoundOptions {
  redis: RedisClient;
  /** QUEUE_PREFIX: the merchants' keys are named under it (`merchantKeys`). */
  queuePrefix: string;
  /** MERCHANT_PAUSED_MAX_BACKLOG; 0: no bound. */
  maxBacklog: number;
  metrics: Pick<IngestMetrics, 'pausedBacklogRefusals'>;
  logger: Logger;
  /** How long a read is used, in ms. @defaultValue {@link PAUSED_BOUND_CACHE_MS} */
  cacheMs?: number;
}

/** Longest wait for the read, in ms: a Redis that hangs delays a callback's reply by no more than this. */
const READ_TIMEOUT_MS = 250;

/** Rejects after `ms` (unref'd: it keeps no process alive). */
function timeout(ms: number): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref());
}

export function createPausedBound(options: PausedBoundOptions): PausedBound {
  const { maxBacklog, metrics } = options;
  const cacheMs = options.cacheMs ?? PAUSED_BOUND_CACHE_MS;
  const logThrottled = createLogThrottle(options.logger);
  const cache = new Map<string, { at: number; refuse: Promise<boolean> }>();

  /**
   * One read: paused and at the bound. A failed or slow read (past {@link READ_TIMEOUT_MS}) refuses nothing: the
   * enqueue, with its own budget, says whether Redis takes the callback.
   */
  const read = async (ref: string): Promise<boolean> => {
    try {
      const reading = readPausedBacklog(options.redis, merchantKeys(options.queuePrefix, ref));
      const { paused, depth } = await Promise.race([reading, timeout(READ_TIMEOUT_MS)]);
      return paused && depth >= maxBacklog;
    } catch (e) {
      logThrottled('paused bound', 'warn', { err: coerceError(e), merchant: ref }, 'merchant pause mirror not read');
      return false;
    }
  };

  return {
    async refuses(ref) {
      if (maxBacklog <= 0) return false;
      const now = performance.now();
      let entry = cache.get(ref);
      // Callbacks arriving together share one read.
      if (!entry || now - entry.at >= cacheMs) {
        entry = { at: now, refuse: read(ref) };
        cache.set(ref, entry);
      }
      const refuse = await entry.refuse;
      if (refuse) metrics.pausedBacklogRefusals.inc({ merchant: ref });
      return refuse;
    },
  };
}
