/**
 * A paused merchant's lane holds (docs/merchants.md "Pausing a merchant"). Postgres's `merchant_pauses` is the truth
 * (a row = paused); every worker process reads it before its lanes take a job, then polls it every
 * {@link PAUSE_POLL_MS}: a lane whose merchant is paused fetches no job (its jobs in progress finish; one taken in the
 * race is put back, callback-processor.ts), and resumes fetching once the row is gone, its Get order budget as before
 * (the fleet's, so the backlog drains at most at its getOrderRps). Polling, not LISTEN: it works through PgBouncer's
 * transaction pooling and needs no connection of its own; one small query per process per poll.
 *
 * Each poll also rebuilds the merchant's Redis mirror (`merchantKeys(...).pausedMirror`) that ingest reads to bound a
 * paused merchant's backlog: a Redis failover or a flush loses it for one poll at most.
 */
import type { Merchant } from '@mcb/core/config';
import { readMerchantPauses, type Database, type MerchantPause } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import { createLogThrottle, type Logger } from '@mcb/core/logger';
import { Gauge, type Registry } from '@mcb/core/metrics';
import { writePauseMirror, type MerchantKeys } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';

/** How often each worker process reads merchant_pauses, in ms: a pause holds every lane within this (plus a query). */
export const PAUSE_POLL_MS = 500;

/** What the watch acts on for one lane. */
export interface PausableLane {
  readonly merchant: Pick<Merchant, 'ref' | 'merchantNo'>;
  readonly keys: Pick<MerchantKeys, 'pausedMirror'>;
  readonly registry: Registry;
  /** The lane's callback worker: held while the merchant is paused. */
  readonly callbacks: {
    pause(doNotWaitActive: boolean, holder: string): Promise<void>;
    resume(holder: string): Promise<void>;
  };
}

/** Options of {@link watchMerchantPauses}. */
export interface MerchantPauseWatchOptions {
  database: Database;
  redis: RedisClient;
  logger: Logger;
  lanes: readonly PausableLane[];
  /** The pauses read before the lanes were built (their workers built held): {@link readPausesByNo}. */
  initial: ReadonlyMap<string, MerchantPause>;
  /** The holder name on the callback workers. */
  holder: string;
  /** Poll interval, in ms. @defaultValue {@link PAUSE_POLL_MS} */
  pollMs?: number;
}

/** The running watch. */
export interface MerchantPauseWatch {
  /** The pause of merchant `ref` as last read, or undefined while it runs. */
  pauseOf(ref: string): MerchantPause | undefined;
  /** Read the table and act on it now (the poll does the same). */
  poll(): Promise<void>;
  stop(): Promise<void>;
}

/** The pauses now, by merchant number: read once before the lanes take a job. */
export async function readPausesByNo(database: Database): Promise<Map<string, MerchantPause>> {
  return new Map((await readMerchantPauses(database)).map((p) => [p.merchantNo, p]));
}

/**
 * Start polling merchant_pauses for `lanes`: hold or resume each lane's callback worker as its row comes and goes,
 * export `mcb_merchant_paused` and `mcb_merchant_paused_since_seconds` in the lane's registry, and keep the Redis
 * mirror equal to the table. A failed read keeps the last state (logged at most once per 10 s).
 */
export function watchMerchantPauses(options: MerchantPauseWatchOptions): MerchantPauseWatch {
  const { lanes, logger, holder } = options;
  const logThrottled = createLogThrottle(logger);
  const state = new Map<string, MerchantPause | undefined>();
  const gauges = new Map(lanes.map((lane) => [lane.merchant.ref, pauseGauges(lane.registry)]));
  for (const lane of lanes) {
    const pause = options.initial.get(lane.merchant.merchantNo);
    state.set(lane.merchant.ref, pause);
    gauges.get(lane.merchant.ref)!.set(pause);
    if (pause) logger.warn(pauseFields(lane, pause), 'merchant paused: its lane takes no jobs until it is resumed');
  }
  let running: Promise<void> | undefined;
  const poll = () => (running ??= pollOnce().finally(() => (running = undefined)));

  async function pollOnce(): Promise<void> {
    let pauses: Map<string, MerchantPause>;
    try {
      pauses = await readPausesByNo(options.database);
    } catch (e) {
      logThrottled(
        'merchant pauses',
        'warn',
        { err: coerceError(e) },
        'merchant_pauses not read: lanes keep their state',
      );
      return;
    }
    await Promise.all(lanes.map((lane) => apply(lane, pauses.get(lane.merchant.merchantNo))));
  }

  async function apply(lane: PausableLane, pause: MerchantPause | undefined): Promise<void> {
    const ref = lane.merchant.ref;
    const before = state.get(ref);
    if (!before !== !pause) {
      state.set(ref, pause);
      gauges.get(ref)!.set(pause);
      if (pause) {
        logger.warn(pauseFields(lane, pause), 'merchant paused: its lane takes no new jobs');
        await lane.callbacks.pause(true, holder);
      } else {
        logger.info({ merchant: ref }, 'merchant resumed: its lane takes jobs again');
        await lane.callbacks.resume(holder);
      }
    } else if (pause && pause.since.getTime() !== before?.since.getTime()) {
      // Resumed and paused again between two polls: still held, since the new pause.
      state.set(ref, pause);
      gauges.get(ref)!.set(pause);
    }
    await mirror(lane, pause);
  }

  /** The mirror equal to the table: read, and written only when it differs (every process polls). */
  async function mirror(lane: PausableLane, pause: MerchantPause | undefined): Promise<void> {
    try {
      const now = await options.redis.get(lane.keys.pausedMirror);
      const want = pause ? String(pause.since.getTime()) : null;
      if (now !== want) await writePauseMirror(options.redis, lane.keys, pause?.since);
    } catch (e) {
      logThrottled('pause mirror', 'warn', { err: coerceError(e) }, 'the Redis mirror of merchant pauses not written');
    }
  }

  const timer = setInterval(() => void poll(), options.pollMs ?? PAUSE_POLL_MS);
  timer.unref();
  // The mirror now, not one poll later: a Redis that lost it during the worker's downtime is rebuilt at start.
  void poll();
  return {
    pauseOf: (ref) => state.get(ref),
    poll,
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/** The lane's pause gauges: 1/0, and the pause's start (0 while it runs). */
function pauseGauges(registry: Registry): { set(pause: MerchantPause | undefined): void } {
  const paused = new Gauge({
    name: 'mcb_merchant_paused',
    help: 'Whether the merchant is paused (merchant_pauses): 1 while its lane takes no jobs',
    registers: [registry],
  });
  const since = new Gauge({
    name: 'mcb_merchant_paused_since_seconds',
    help: 'When the merchant was paused, in seconds since the epoch (0 while it runs); alert MerchantPausedLong',
    registers: [registry],
  });
  return {
    set(pause) {
      paused.set(pause ? 1 : 0);
      since.set(pause ? pause.since.getTime() / 1000 : 0);
    },
  };
}

/** A pause's log fields: who and since when (the reason stays in the audit trail and the console). */
function pauseFields(lane: PausableLane, pause: MerchantPause) {
  return { merchant: lane.merchant.ref, pausedBy: pause.pausedBy, since: pause.since.toISOString() };
}
