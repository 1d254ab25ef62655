/**
 * The Redis mirror of a merchant's pause (`merchantKeys(...).pausedMirror`): Postgres's `merchant_pauses` is the
 * truth; the mirror lets ingest (which has no Postgres) see a pause and bound the merchant's backlog. The console
 * writes it on pause and resume; every worker rewrites it from the table, so a lost or stale mirror (a Redis failover,
 * a flush) is rebuilt within a poll (docs/merchants.md "Pausing a merchant").
 */
import type { RedisClient } from '../redis.ts';
import type { MerchantKeys } from './keys.ts';

/** Mark the merchant paused since `since` (set), or running (`undefined`: deleted). */
export async function writePauseMirror(
  redis: RedisClient,
  keys: Pick<MerchantKeys, 'pausedMirror'>,
  since: Date | undefined,
): Promise<void> {
  if (since) await redis.set(keys.pausedMirror, String(since.getTime()));
  else await redis.del(keys.pausedMirror);
}

/** What ingest reads of a merchant: paused or not, and its callbacks stored and not yet run. */
export interface PausedBacklog {
  /** The mirror says paused. */
  paused: boolean;
  /** Its callbacks queue's jobs waiting, delayed (retries) and prioritized: what a pause leaves in Redis. */
  depth: number;
}

/**
 * The mirror and, when it says paused, the callbacks queue's backlog: one round trip (the keys share the merchant's
 * hash tag, so one slot on Redis Cluster). BullMQ's key names: `{prefix}:{queue}:wait|paused` (lists),
 * `delayed|prioritized` (sorted sets).
 */
export async function readPausedBacklog(
  redis: RedisClient,
  keys: Pick<MerchantKeys, 'prefix' | 'callbacksQueue' | 'pausedMirror'>,
): Promise<PausedBacklog> {
  const q = `${keys.prefix}:${keys.callbacksQueue}`;
  const replies = await redis
    .pipeline()
    .exists(keys.pausedMirror)
    .llen(`${q}:wait`)
    .llen(`${q}:paused`)
    .zcard(`${q}:delayed`)
    .zcard(`${q}:prioritized`)
    .exec();
  if (!replies) throw new Error('the pause mirror read got no reply');
  const values = replies.map(([err, value]) => {
    if (err) throw err;
    return Number(value);
  });
  const [exists, ...depths] = values;
  return { paused: exists === 1, depth: depths.reduce((a, b) => a + b, 0) };
}
