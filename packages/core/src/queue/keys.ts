/**
 * Every Redis key a merchant owns, named in one place: its BullMQ queues (under its own prefix, so on Redis Cluster
 * each merchant's keys share one slot and merchants spread over the masters), the worker's unknown-order set, the
 * fleet's Get order budget and breaker, and the reconciliation lock. The `default` merchant (the one MERCHANT_NO
 * makes) keeps today's names, so a deployment that upgrades keeps its queue, its budget and its lock.
 */
import { DEFAULT_MERCHANT_REF } from '../config/merchants.ts';
import { hashTagOf } from '../config/redis.ts';

/** The one BullMQ queue of callback events of the `default` merchant (docs/design.md contract). */
export const CALLBACKS_QUEUE = 'callbacks';
/** Repeatable housekeeping of the `default` merchant: reconciliation sweeps and catalog refresh. */
export const MAINTENANCE_QUEUE = 'maintenance';

/** The fleet's keys of one Get order budget and breaker (packages/core/src/platform/fleet.ts). */
export interface FleetKeys {
  /** GCRA state: the next start time (`tat`) and when the budget last refused (`throttled`). */
  readonly budget: string;
  /** Processes alive, scored by their last heartbeat. */
  readonly alive: string;
  /** Present while the breaker is open. */
  readonly breaker: string;
  /** The probe token of an open breaker. */
  readonly probe: string;
}

/** What {@link merchantKeys} names. */
export interface MerchantKeys {
  /** BullMQ prefix of the merchant's queues. */
  readonly prefix: string;
  /** Its queue of callback events. */
  readonly callbacksQueue: string;
  /** Its queue of reconciliation sweeps and catalog refreshes. */
  readonly maintenanceQueue: string;
  /** Sorted set of its callback jobs waiting for their order to be registered (WORKER_MAX_UNKNOWN_WAITING). */
  readonly unknownOrderWaiting: string;
  /** Its Get order budget and breaker, shared by every worker process and the console. */
  readonly fleet: FleetKeys;
  /** The "one sweep at a time" lock of its reconciliation. */
  readonly sweepLock: string;
  /**
   * Hash of its worker lanes' live figures (Get order p99, errors, rate, breaker), one field per worker process,
   * rewritten every few seconds (apps/worker/src/lane-snapshot.ts); the console's merchants page merges them.
   */
  readonly laneSnapshots: string;
  /**
   * Present while the merchant is paused (its value: the pause's start, ms since the epoch): a mirror of Postgres's
   * `merchant_pauses` for ingest, which has no Postgres. Written by the console, rebuilt by every worker from the
   * table (docs/merchants.md "Pausing a merchant").
   */
  readonly pausedMirror: string;
}

/**
 * The merchant's own prefix: QUEUE_PREFIX with the merchant in its hash tag (`{mcb}` → `{mcb-b}`), so that each
 * merchant's keys share a slot of their own; without a hash tag (one Redis) QUEUE_PREFIX itself.
 */
function merchantPrefix(queuePrefix: string, ref: string): string {
  const tag = hashTagOf(queuePrefix);
  if (tag === undefined) return queuePrefix;
  const open = queuePrefix.indexOf('{');
  return `${queuePrefix.slice(0, open)}{${tag}-${ref}}${queuePrefix.slice(open + tag.length + 2)}`;
}

/** Every Redis key merchant `ref` owns under QUEUE_PREFIX `queuePrefix`. */
export function merchantKeys(queuePrefix: string, ref: string = DEFAULT_MERCHANT_REF): MerchantKeys {
  const legacy = ref === DEFAULT_MERCHANT_REF;
  const prefix = legacy ? queuePrefix : merchantPrefix(queuePrefix, ref);
  const callbacksQueue = legacy ? CALLBACKS_QUEUE : `${CALLBACKS_QUEUE}-${ref}`;
  const maintenanceQueue = legacy ? MAINTENANCE_QUEUE : `${MAINTENANCE_QUEUE}-${ref}`;
  const fleet = `${prefix}:platform:${legacy ? 'all' : `m-${ref}`}`;
  return {
    prefix,
    callbacksQueue,
    maintenanceQueue,
    unknownOrderWaiting: `${prefix}:${callbacksQueue}:unknown-order-waiting`,
    fleet: {
      budget: `${fleet}:budget`,
      alive: `${fleet}:alive`,
      breaker: `${fleet}:breaker`,
      probe: `${fleet}:probe`,
    },
    sweepLock: `${prefix}:${maintenanceQueue}:reconcile-lock`,
    laneSnapshots: `${fleet}:lanes`,
    pausedMirror: `${prefix}:${callbacksQueue}:merchant-paused`,
  };
}
