import { AppError, coerceError } from '@mcb/core/errors';
import type { PlatformOrder } from '@mcb/core/platform';
import { classifyError, jobErrorCode, toJobError } from '../retry-policy.ts';
import { applyConfirmed } from '../settle.ts';
import { unusableAnswer } from '../unusable-answer.ts';
import type { PendingOrder } from './pending-orders.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { isFinal, sweepEvent } from './sweep-event.ts';
import type { SweepDeps, SweepReport } from './sweep.ts';
import { clearUnknown, recordUnknown, type UnknownBackoff } from './unknown-backoff.ts';

/** What one order's look-up came to, as the sweep's report counts it. */
export type Outcome = 'credited' | 'succeeded' | 'refused' | 'stillPending' | 'unknown' | 'duplicates' | 'reviews';

/** What {@link reconcileOne} shares with its sweep. */
export interface OneContext {
  limiter: RateLimiter;
  signal: AbortSignal;
  startedAt: Date;
  backoff: UnknownBackoff;
  count: (order: PendingOrder, outcome: Outcome) => void;
  failed: (code: string) => void;
  report: SweepReport;
}

/**
 * Look one order up and, when Get order reports it final, apply it as its callback would have been. An answer that
 * says nothing usable about the order is recorded as "unknown" (its back-off); only an outage counts as a failure.
 */
export async function reconcileOne(deps: SweepDeps, order: PendingOrder, ctx: OneContext): Promise<void> {
  const log = deps.logger.child({ merchantOrderNo: order.merchantOrderNo, kind: order.kind, source: 'reconcile' });
  try {
    await ctx.limiter.take(ctx.signal);
  } catch {
    return; // stopped while waiting for a slot: the order was not looked up
  }
  const scanned = () => {
    ctx.report.scanned += 1;
    deps.reconcileMetrics?.scanned.inc({ kind: order.kind });
  };

  let confirmed: PlatformOrder;
  const started = performance.now();
  try {
    confirmed = await deps.platform.getOrder(order.merchantOrderNo, { signal: ctx.signal });
    deps.metrics?.getOrderDuration.observe({ result: 'ok' }, (performance.now() - started) / 1000);
    scanned();
  } catch (e) {
    // Cut off by the stop (lock lost, shutdown, too many errors): not an answer, not counted.
    if (ctx.signal.aborted) return;
    const code = e instanceof AppError ? e.code : 'error';
    deps.metrics?.getOrderDuration.observe({ result: code }, (performance.now() - started) / 1000);
    scanned();
    // Only an outage may stop a sweep. An answer that says nothing usable about this order (a refusal such as an order
    // the platform never saw, its "not found" as a 404, code 0 without data) is this order's: abandoned checkouts at
    // the front of the window must not keep the sweep from the paid orders behind them.
    const unusable = classifyError(e) === 'transient' ? undefined : unusableAnswer(e);
    if (unusable) return answeredUnknown(deps, order, unusable, ctx);
    const err = coerceError(e);
    log.warn({ code, err }, `reconcile: Get order failed: ${err.message}`);
    ctx.failed(code);
    return;
  }

  if (order.unknownCount > 0 && !(await usableAgain(deps, order, ctx))) return;
  if (!isFinal(confirmed)) {
    log.debug({ state: confirmed.state }, 'reconcile: not final yet; left pending');
    ctx.count(order, 'stillPending');
    return;
  }

  const event = sweepEvent(
    confirmed,
    { merchantNo: deps.merchantNo, merchantOrderNo: order.merchantOrderNo },
    ctx.startedAt,
  );
  try {
    // The answer is in hand: decide on it, with no second Get order.
    const applied = await applyConfirmed(event, confirmed, deps, {
      noWait: true,
      signal: ctx.signal,
      jobId: `reconcile-${ctx.startedAt.getTime()}`,
    });
    if (applied.status === 'applied') ctx.count(order, applied.outcome);
    else if (applied.status === 'duplicate') ctx.count(order, 'duplicates');
    else if (applied.status === 'review') ctx.count(order, 'reviews');
    else ctx.count(order, 'stillPending'); // 'deferred' cannot happen with noWait; nothing was written
  } catch (e) {
    // Sanitised: drizzle's errors carry the query's parameters.
    const err = toJobError(e);
    const code = jobErrorCode(err);
    log.error(
      { code, err, orderNo: event.orderNo, state: event.state },
      `reconcile: applying the confirmed state failed: ${err.message}`,
    );
    ctx.failed(code);
  }
}

/** Count the order "unknown" (report, metric) and put it on its back-off, so the next sweeps do not ask at once. */
async function answeredUnknown(
  deps: SweepDeps,
  order: PendingOrder,
  answer: NonNullable<ReturnType<typeof unusableAnswer>>,
  ctx: OneContext,
): Promise<void> {
  const log = deps.logger.child({ merchantOrderNo: order.merchantOrderNo, kind: order.kind, source: 'reconcile' });
  deps.reconcileMetrics?.unknown.inc({ code: answer.code });
  try {
    const inARow = await recordUnknown(deps.db, order.id, { code: answer.code, at: ctx.startedAt }, ctx.backoff);
    log.info(
      { code: answer.code, ...answer.details, inARow },
      `reconcile: ${answer.reason}; left pending, asked again after its back-off`,
    );
    ctx.count(order, 'unknown');
  } catch (e) {
    const err = toJobError(e);
    log.error({ code: jobErrorCode(err), err }, `reconcile: recording the unknown answer failed: ${err.message}`);
    ctx.failed(jobErrorCode(err));
  }
}

/** Get order answered about an order it had answered "unknown" about: end its back-off. False when that failed. */
async function usableAgain(deps: SweepDeps, order: PendingOrder, ctx: OneContext): Promise<boolean> {
  try {
    await clearUnknown(deps.db, order.id);
    return true;
  } catch (e) {
    const err = toJobError(e);
    deps.logger.error(
      { merchantOrderNo: order.merchantOrderNo, code: jobErrorCode(err), err },
      `reconcile: ending the unknown back-off failed: ${err.message}`,
    );
    ctx.failed(jobErrorCode(err));
    return false;
  }
}
