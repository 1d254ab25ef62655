/**
 * A merchant's lane through ingest (docs/merchants.md): the key ring its callbacks are opened with, and the queue
 * they are stored in. Made once at start, one per merchant of `config.merchants`; a route resolves to one of them.
 */
import { Queue, type QueueOptions } from 'bullmq';
import type { KeyRing, MerchantKeyRings } from '@mcb/core/callback';
import type { Config, Merchant } from '@mcb/core/config';
import { merchantKeys } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';

/** One merchant as ingest serves it. */
export interface IngestLane {
  readonly merchant: Merchant;
  /** Its own key ring: its callbacks are decrypted with these keys and no other merchant's. */
  readonly keyRing: KeyRing;
  /** Its callbacks queue (`merchantKeys(QUEUE_PREFIX, ref)`), on the producer connection every lane shares. */
  readonly queue: Queue;
}

/**
 * A lane per merchant of `config.merchants`: its ring from `rings`, and a BullMQ Queue of its own on `redis`, named
 * and prefixed as merchantKeys says (`default` keeps today's `callbacks` under QUEUE_PREFIX). The caller closes the
 * queues (see {@link closeLanes}).
 * @param queueOptions more options of each Queue (BullMQ telemetry)
 */
export function openLanes(
  config: Config,
  redis: RedisClient,
  rings: MerchantKeyRings,
  queueOptions: Partial<QueueOptions> = {},
): IngestLane[] {
  return config.merchants.map((merchant) => {
    const keyRing = rings.get(merchant.ref);
    if (!keyRing) throw new Error(`no key ring for merchant "${merchant.ref}"`);
    const keys = merchantKeys(config.QUEUE_PREFIX, merchant.ref);
    const queue = new Queue(keys.callbacksQueue, { ...queueOptions, connection: redis, prefix: keys.prefix });
    return { merchant, keyRing, queue };
  });
}

/** Close every lane's queue (not the connection they share). */
export async function closeLanes(lanes: readonly IngestLane[]): Promise<void> {
  await Promise.all(lanes.map((l) => l.queue.close()));
}

/**
 * The lanes a build serves: `lanes`, one per merchant of `config.merchants`; or, for a deployment of one merchant,
 * that merchant with `queue` and `keyRing`.
 * @throws Error when they do not match the config (a wiring mistake, not an operator's)
 */
export function lanesOf(
  config: Config,
  given: { lanes?: readonly IngestLane[]; queue?: Queue; keyRing?: KeyRing },
): readonly IngestLane[] {
  if (given.lanes) {
    const refs = given.lanes.map((l) => l.merchant.ref).sort();
    const configured = config.merchants.map((m) => m.ref).sort();
    if (refs.join('\n') !== configured.join('\n'))
      throw new Error(`ingest lanes (${refs.join(', ')}) are not the configured merchants (${configured.join(', ')})`);
    return given.lanes;
  }
  const [only, ...more] = config.merchants;
  if (!only || more.length > 0 || !given.queue || !given.keyRing)
    throw new Error('ingest needs a lane per merchant (lanes), or queue and keyRing for a single merchant');
  return [{ merchant: only, keyRing: given.keyRing, queue: given.queue }];
}
