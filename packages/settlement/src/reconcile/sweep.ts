import { AppError, coerceError, ErrorCodes } from '@mcb/core/errors';
import { merchantPauseOf } from '@mcb/core/db';
import type { RedisClient } from '@mcb/core/redis';
import type { ApplyDeps } from '../settle.ts';
import { toJobError } from '../retry-policy.ts';
import type { ReconcileMetrics } from './metrics.ts';
import { countPendingBefore, pendingOrdersBatch, type PendingCursor, type PendingOrder } from './pending-orders.ts';
import { createRateLimiter } from './rate-limiter.ts';
import { reconcileOne, type Outcome } from './reconcile-one.ts';
import { acquireSweepLock } from './sweep-lock.ts';
import { DEFAULT_UNKNOWN_BACKOFF, type UnknownBackoff } from './unknown-backoff.ts';

/** How a sweep looks for orders; the worker fills it from RECONCILE_*. */
export interface SweepSettings {
  /** Pending orders younger than this are left to their callbacks (RECONCILE_MIN_AGE), in ms. @defaultValue 600000 */
  minAgeMs: number;
  /** Pending orders older than this are no longer looked up (RECONCILE_MAX_AGE), in ms. @defaultValue 604800000 */
  maxAgeMs: number;
  /** Get order requests per second across the sweep (RECONCILE_RATE). @defaultValue 20 */
  ratePerSecond: number;
  /** Orders read from Postgres per batch (RECONCILE_BATCH_SIZE). @defaultValue 100 */
  batchSize: number;
  /** Get order requests in flight at once (the rate still caps their starts). @defaultValue min(4, ceil(ratePerSecond)) */
  concurrency?: number;
  /**
   * Failures in a row after which the sweep stops; the next run starts over. Only an outage counts (the platform
   * timing out, unreachable, 5xx, 408, 429, a reply that is not its envelope; Postgres down): an answer that says
   * nothing usable about one order is that order's "unknown". @defaultValue 3
   */
  maxConsecutiveErrors?: number;
  /** How long an order answered "unknown" is left out of the sweeps. @defaultValue 15 minutes, doubling, at most 6 hours */
  unknownBackoff?: UnknownBackoff;
}

/** What {@link runSweep} needs: applyEvent's dependencies plus the lock's Redis and the settings. */
export interface SweepDeps extends ApplyDeps {
  /** Holds the "one sweep at a time" lock. */
  redis: RedisClient;
  /** Key of the lock (`merchantKeys(QUEUE_PREFIX, ref).sweepLock`): every worker and the console must use the same. */
  lockKey: string;
  /** Lock time to live, in ms; renewed while the sweep runs. @defaultValue 60000 */
  lockTtlMs?: number;
  /**
   * The merchant number swept: only its pending orders are read, and the events rebuilt from Get order carry it (they
   * are checked against Get order's answer as ingest checks a callback's). `platform` must be that merchant's.
   */
  merchantNo: string;
  settings: SweepSettings;
  reconcileMetrics?: ReconcileMetrics;
}

/** What one sweep found. */
export interface SweepReport {
  trigger: 'schedule' | 'manual';
  startedAt: string;
  /** The creation-time window swept (oldest and newest `created_at`). */
  window: { oldest: string; newest: string };
  /** Pending orders looked up with Get order. */
  scanned: number;
  /** Orders finalised by this sweep, by outcome. */
  recovered: { credited: number; succeeded: number; refused: number };
  /** Get order reports them not final: left pending, no review. */
  stillPending: number;
  /**
   * Get order said nothing usable about them (a refusal such as 40404, an HTTP 3xx/4xx, code 0 without the order):
   * left pending, no review, and not asked again before their back-off ends.
   */
  unknown: number;
  /** Which orders (merchant order numbers) were still pending and unknown: the first {@link REPORT_ORDERS_MAX} of each. */
  orders: { stillPending: string[]; unknown: string[] };
  /** Already applied by a callback meanwhile (the dedup key held). */
  duplicates: number;
  /** Get order's answer failed verification (e.g. amount differs from ours): sent to review, not credited. */
  reviews: number;
  /** Orders the sweep could not decide (the platform or Postgres failing): only these can stop a sweep. */
  errors: number;
  /** Pending orders older than the window, which no sweep looks at any more. */
  beyondMaxAge: number;
  stoppedEarly: boolean;
  /** Why the sweep stopped early, or null. */
  stopReason: string | null;
  durationMs: number;
}

/** Options of one {@link runSweep} call. */
export interface SweepOptions {
  /** @defaultValue 'manual' */
  trigger?: 'schedule' | 'manual';
  /** Stops the sweep between orders (and aborts the request in flight), e.g. on shutdown. */
  signal?: AbortSignal;
  /**
   * Ask the orders on their "unknown" back-off too (an operator's sweep now, for a customer who says they paid); the
   * answers still count toward each order's back-off. @defaultValue false
   */
  askBackedOff?: boolean;
}

const FAR_FUTURE = new Date('9999-12-31T00:00:00Z');

/** Most order numbers a report names per outcome (the counts stay exact). */
export const REPORT_ORDERS_MAX = 100;

/**
 * One reconciliation sweep: pending orders created between MAX_AGE and MIN_AGE ago are looked up with Get order,
 * in keyset batches, at RECONCILE_RATE; a final state goes through {@link applyConfirmed} (the callback's own
 * verification and transaction, same dedup key), so a sweep and a late callback never both credit. Runs only
 * while it holds the Redis lock shared by every worker and the console.
 *
 * @throws AppError RECONCILE_IN_PROGRESS when another sweep holds the lock; RECONCILE_UNAVAILABLE when the lock
 *   cannot be asked for (Redis down). Everything else is counted in the report: a failing platform or database stops the sweep early.
 */
export async function runSweep(deps: SweepDeps, options: SweepOptions = {}): Promise<SweepReport> {
  const trigger = options.trigger ?? 'manual';
  const log = deps.logger.child({ sweep: trigger });
  let lock: Awaited<ReturnType<typeof acquireSweepLock>>;
  try {
    lock = await acquireSweepLock(deps.redis, { key: deps.lockKey, ttlMs: deps.lockTtlMs, logger: log });
  } catch (e) {
    throw new AppError(
      ErrorCodes.RECONCILE_UNAVAILABLE,
      'the reconciliation lock could not be asked for (Redis unreachable)',
      {
        cause: e,
        transient: true,
      },
    );
  }
  if (!lock) {
    deps.reconcileMetrics?.sweeps.inc({ trigger, result: 'busy' });
    throw new AppError(ErrorCodes.RECONCILE_IN_PROGRESS, 'a reconciliation sweep is already running', {
      transient: true,
    });
  }
  try {
    // A paused merchant's sweep waits for its resume (docs/merchants.md "Pausing a merchant"): checked under the lock,
    // so a pause committed before it was taken is always seen; a pause during the sweep stops it at its next batch.
    await refuseIfPaused(deps, trigger);
    const signal = options.signal ? AbortSignal.any([options.signal, lock.lost]) : lock.lost;
    const report = await sweep(deps, { trigger, askBackedOff: options.askBackedOff ?? false }, signal);
    deps.reconcileMetrics?.sweeps.inc({ trigger, result: report.stoppedEarly ? 'stopped' : 'completed' });
    deps.reconcileMetrics?.lastSweepTimestamp.set(Date.now() / 1000);
    deps.reconcileMetrics?.lastSweepDuration.set(report.durationMs / 1000);
    deps.reconcileMetrics?.pendingBeyondMaxAge.set(report.beyondMaxAge);
    const summary = { ...report, window: undefined, orders: undefined };
    if (report.stoppedEarly) log.warn(summary, `reconciliation sweep stopped early: ${report.stopReason}`);
    else log.info(summary, 'reconciliation sweep done');
    return report;
  } finally {
    await lock.release();
  }
}

/** 409 MERCHANT_PAUSED when the merchant's row is in merchant_pauses: nothing is swept. */
async function refuseIfPaused(deps: SweepDeps, trigger: 'schedule' | 'manual'): Promise<void> {
  // Postgres unreadable: the sweep's own first read fails the same way and reports it (a stop, not a crash).
  const pause = await merchantPauseOf(deps.db, deps.merchantNo).catch(() => undefined);
  if (!pause) return;
  deps.reconcileMetrics?.sweeps.inc({ trigger, result: 'paused' });
  throw new AppError(
    ErrorCodes.MERCHANT_PAUSED,
    `merchant ${deps.merchantNo} is paused (since ${pause.since.toISOString()}): its sweep waits for its resume`,
    { details: { merchantNo: deps.merchantNo, since: pause.since.toISOString() } },
  );
}

async function sweep(
  deps: SweepDeps,
  { trigger, askBackedOff }: { trigger: 'schedule' | 'manual'; askBackedOff: boolean },
  signal: AbortSignal,
): Promise<SweepReport> {
  const now = deps.now ?? Date.now;
  const started = performance.now();
  const startedAt = new Date(now());
  const { settings, logger } = deps;
  const oldest = new Date(startedAt.getTime() - settings.maxAgeMs);
  const newest = new Date(startedAt.getTime() - settings.minAgeMs);
  const report = emptyReport(trigger, startedAt, { oldest, newest });
  const maxConsecutive = settings.maxConsecutiveErrors ?? 3;
  let consecutiveErrors = 0;
  // Stops the batch loop and the requests in flight once errors pile up.
  const stop = new AbortController();
  const halted = AbortSignal.any([signal, stop.signal]);
  const halt = (reason: string) => {
    if (report.stoppedEarly) return;
    report.stoppedEarly = true;
    report.stopReason = reason;
    stop.abort(new Error(reason));
  };
  // The report reaches the console's API: it names codes only, never messages (hosts, SQL); the log has those.
  const failed = (code: string) => {
    report.errors += 1;
    consecutiveErrors += 1;
    deps.reconcileMetrics?.errors.inc({ code });
    if (consecutiveErrors >= maxConsecutive) halt(`${consecutiveErrors} failures in a row, the last ${code}`);
  };
  const count = (order: PendingOrder, outcome: Outcome) => {
    consecutiveErrors = 0;
    if (outcome === 'credited' || outcome === 'succeeded' || outcome === 'refused') {
      report.recovered[outcome] += 1;
      deps.reconcileMetrics?.recovered.inc({ kind: order.kind, outcome });
    } else {
      report[outcome] += 1;
      // An operator acts on these by number (ask the platform, the customer); the log alone is not where to look.
      if ((outcome === 'stillPending' || outcome === 'unknown') && report.orders[outcome].length < REPORT_ORDERS_MAX) {
        report.orders[outcome].push(order.merchantOrderNo);
      }
    }
  };

  const limiter = createRateLimiter(settings.ratePerSecond);
  const backoff = settings.unknownBackoff ?? DEFAULT_UNKNOWN_BACKOFF;
  const concurrency = Math.max(1, settings.concurrency ?? Math.min(4, Math.ceil(settings.ratePerSecond)));
  try {
    report.beyondMaxAge = await countPendingBefore(deps.db, deps.merchantNo, oldest);
    let cursor: PendingCursor | undefined;
    for (;;) {
      if (halted.aborted) break;
      if (cursor && (await merchantPauseOf(deps.db, deps.merchantNo))) {
        halt('the merchant was paused');
        break;
      }
      // Asking the backed-off orders too: every back-off ends before the end of time.
      const window = {
        merchantNo: deps.merchantNo,
        oldest,
        newest,
        now: askBackedOff ? FAR_FUTURE : startedAt,
        after: cursor,
        limit: settings.batchSize,
      };
      const batch = await pendingOrdersBatch(deps.db, window);
      if (batch.length === 0) break;
      let next = 0;
      const lane = async () => {
        while (next < batch.length && !halted.aborted) {
          const order = batch[next++]!;
          await reconcileOne(deps, order, { limiter, signal: halted, startedAt, backoff, count, failed, report });
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, batch.length) }, lane));
      const last = batch.at(-1)!;
      cursor = { createdAtText: last.createdAtText, id: last.id };
      if (batch.length < settings.batchSize) break;
    }
  } catch (e) {
    // Reading the batches failed (Postgres down): report it; the next run starts over.
    const err = toJobError(e);
    logger.error({ err }, `reconciliation sweep could not read pending orders: ${err.message}`);
    report.errors += 1;
    deps.reconcileMetrics?.errors.inc({ code: ErrorCodes.DB_UNAVAILABLE });
    halt(`reading pending orders failed (${ErrorCodes.DB_UNAVAILABLE})`);
  }
  if (signal.aborted && !report.stoppedEarly) halt(`aborted: ${coerceError(signal.reason).message}`);
  report.durationMs = Math.round(performance.now() - started);
  return report;
}

/** A report of nothing found yet. */
function emptyReport(
  trigger: 'schedule' | 'manual',
  startedAt: Date,
  { oldest, newest }: { oldest: Date; newest: Date },
): SweepReport {
  return {
    trigger,
    startedAt: startedAt.toISOString(),
    window: { oldest: oldest.toISOString(), newest: newest.toISOString() },
    scanned: 0,
    recovered: { credited: 0, succeeded: 0, refused: 0 },
    stillPending: 0,
    unknown: 0,
    orders: { stillPending: [], unknown: [] },
    duplicates: 0,
    reviews: 0,
    errors: 0,
    beyondMaxAge: 0,
    stoppedEarly: false,
    stopReason: null,
    durationMs: 0,
  };
}
