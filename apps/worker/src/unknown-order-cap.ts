import type { RedisClient } from '@mcb/core/redis';

/**
 * How many events wait at once for their order to be registered (VERIFY_ORDER_UNKNOWN), counted in a Redis sorted
 * set of job ids scored by when they started waiting. Beyond the cap a new one is decided at once (a review row in
 * Postgres) instead of holding ~1 KiB of Redis for ORDER_GRACE_PERIOD: forged callbacks for unknown orders cannot
 * fill Redis. A genuine one that landed in review is still credited by the sweep once its order is registered.
 */
export interface UnknownOrderCap {
  /** Most events waiting at once; 0 when the cap is off. */
  readonly max: number;
  /** Count the job among those waiting for their order; true when that passes the cap (decide it now). */
  overCap(jobId: string): Promise<boolean>;
  /** The job no longer waits for its order (it may have on an earlier attempt); never fails. */
  release(jobId: string): Promise<void>;
}

/** Options of {@link createUnknownOrderCap}. */
export interface UnknownOrderCapOptions {
  connection: RedisClient;
  /** The set's key (`{prefix}:callbacks:unknown-order-waiting`). */
  key: string;
  /** Most events waiting at once (WORKER_MAX_UNKNOWN_WAITING); 0 disables the cap. */
  max: number;
  /** ORDER_GRACE_PERIOD, in ms: entries older than it and an hour are dropped (their jobs ended long ago). */
  graceMs: number;
}

export function createUnknownOrderCap({ connection, key, max, graceMs }: UnknownOrderCapOptions): UnknownOrderCap {
  return {
    max,
    async overCap(jobId) {
      if (max <= 0) return false;
      const now = Date.now();
      const replies = await connection
        .multi()
        .zremrangebyscore(key, 0, now - graceMs - 3_600_000)
        .zadd(key, 'NX', now, jobId)
        .zcard(key)
        .exec();
      const count = Number(replies?.[2]?.[1] ?? 0);
      if (count <= max) return false;
      await connection.zrem(key, jobId);
      return true;
    },
    async release(jobId) {
      if (max <= 0) return;
      await connection.zrem(key, jobId).catch(() => 0);
    },
  };
}
