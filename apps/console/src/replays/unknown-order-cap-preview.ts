import type { RedisClient } from '@mcb/core/redis';

/** What the preview reads: the worker's settings and the Redis its cap lives in. */
interface CapDeps {
  /** The merchant's unknown-order set (`merchantKeys(...).unknownOrderWaiting`): each merchant has its own cap. */
  key: string;
  orderGracePeriodMs?: number | undefined;
  maxUnknownWaiting?: number | undefined;
  redis?: RedisClient | undefined;
}

/** Whether the worker's unknown-order cap would have room for each job, as the jobs of this dry run take its room. */
export interface UnknownOrderCapPreview {
  full(jobId: string): Promise<boolean>;
}

/**
 * The cap as the worker holds it (unknown-order-cap.ts): a sorted set of the jobs waiting for their order, at most
 * WORKER_MAX_UNKNOWN_WAITING; a job already in it keeps its place. Read, never written: each job of the dry run that
 * would wait takes one place of what is free now.
 */
export async function unknownOrderCapPreview(deps: CapDeps): Promise<UnknownOrderCapPreview> {
  const max = deps.maxUnknownWaiting ?? 10_000;
  const redis = deps.redis;
  if (max <= 0 || !redis) return { full: async () => false };
  const key = deps.key;
  const stale = Date.now() - (deps.orderGracePeriodMs ?? 15 * 60_000) - 3_600_000;
  let taken = await redis.zcount(key, `(${stale}`, '+inf');
  return {
    async full(jobId) {
      if ((await redis.zscore(key, jobId)) !== null) return taken > max;
      if (taken >= max) return true;
      taken += 1;
      return false;
    },
  };
}
