import type { Database } from '@mcb/core/db';
import { AppError, ErrorCodes, type ErrorCode } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { PlatformCodeError, type PlatformClient, type PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import { commitEvent } from './commit-event.ts';
import type { WorkerMetrics } from './metrics.ts';
import { findOrder, receiptExists } from './queries.ts';
import { recordReview } from './record-review.ts';
import { checkOwnOrder, targetStatus, verifyConfirmation, type TargetStatus, type VerifyFailure } from './verify.ts';

/** What {@link applyEvent} needs. */
export interface ApplyDeps {
  db: Database;
  platform: PlatformClient;
  logger: Logger;
  metrics?: WorkerMetrics;
  /** How long an event may wait for its order to be registered (ORDER_GRACE_PERIOD), in ms. @defaultValue 900000 */
  orderGracePeriodMs?: number;
  /** How long Get order may answer "not final" (CONFIRM_MAX_WAIT), in ms. @defaultValue 7200000 */
  confirmMaxWaitMs?: number;
  /** Clock, in ms since the epoch. @defaultValue Date.now */
  now?: () => number;
  /**
   * Told once when an event opens a review (not when it counts another occurrence of an open one), whichever path
   * it came by: a callback job, a reconciliation sweep or a console re-verify. Must not throw or block.
   */
  onReviewOpened?: (review: OpenedReview) => void;
  /** Called right after the transaction commits, before anything else (the crash tests die here). */
  afterCommit?: (outcome: ApplyOutcome) => void | Promise<void>;
}

/** Per-call options of {@link applyEvent}. */
export interface ApplyOptions {
  /** When the event was first seen, in ms since the epoch; the waiting bounds count from here. @defaultValue event.receivedAt, else now */
  firstSeenAt?: number;
  /** Recorded on the receipt. */
  jobId?: string;
  /** Aborts the Get order call. */
  signal?: AbortSignal;
  /** Decide now: an event that would wait (order unknown, not final) goes to review instead. @defaultValue false */
  noWait?: boolean;
}

/** A review just opened: order numbers, state and reason, never the record's amounts. */
export interface OpenedReview {
  reviewId: number;
  kind: CallbackJob['kind'];
  orderNo: string;
  state: number;
  merchantOrderNo: string;
  code: ErrorCode;
  reason: string;
}

/** What applying an event came to. */
export type ApplyOutcome =
  | { status: 'applied'; outcome: TargetStatus; orderId: number; receiptId: number }
  | { status: 'duplicate'; reason: 'receipt-exists' | 'already-final' }
  | { status: 'review'; code: ErrorCode; reason: string; reviewId: number; opened: boolean }
  /** Not decidable yet (order not registered, Get order not final); try again later. Nothing was written. */
  | { status: 'deferred'; code: ErrorCode; reason: string };

const DEFAULT_GRACE_MS = 15 * 60_000;
const DEFAULT_CONFIRM_MAX_WAIT_MS = 2 * 3600_000;

/**
 * Verify an event with Get order and apply it at most once: the path a callback job, a re-verified review and a
 * reconciliation sweep all take, under the same (OrderNo, state) dedup key. Follows the spec's "Handling order":
 * 1. a receipt of the pair exists → duplicate; 2. our order (unknown → wait for the grace period, then review);
 * 3. Get order by MerchantOrderNo (not final → wait up to CONFIRM_MAX_WAIT, then review); 4. verify state and
 * amounts (mismatch → review, no retry); 5. one transaction: receipt, guarded transition, ledger, outbox.
 *
 * @throws transient errors (Postgres or platform unreachable, 5xx, timeouts) for the caller to retry;
 *   AppError JOB_PAYLOAD_INVALID when the event's state is not one its kind defines.
 */
export async function applyEvent(event: CallbackJob, deps: ApplyDeps, options: ApplyOptions = {}): Promise<ApplyOutcome> {
  const now = deps.now ?? Date.now;
  const received = Date.parse(event.receivedAt);
  const firstSeenAt = options.firstSeenAt ?? (Number.isNaN(received) ? now() : received);
  const waited = now() - firstSeenAt;
  const log = deps.logger.child({
    kind: event.kind,
    orderNo: event.orderNo,
    state: event.state,
    merchantOrderNo: event.merchantOrderNo,
    source: event.source,
    ...(options.jobId ? { jobId: options.jobId } : {}),
  });

  const target = targetStatus(event);
  if (!target) {
    throw new AppError(ErrorCodes.JOB_PAYLOAD_INVALID, `state ${event.state} is not a final ${event.kind} state`, {
      details: { orderNo: event.orderNo, state: event.state },
    });
  }

  const review = async (failure: Omit<VerifyFailure, 'retry'>): Promise<ApplyOutcome> => {
    const { id: reviewId, opened } = await recordReview(deps.db, event, failure);
    deps.metrics?.reviews.inc({ kind: event.kind, code: failure.code });
    log.warn({ code: failure.code, reviewId, opened, details: failure.details }, `event sent to review: ${failure.reason}`);
    if (opened) {
      try {
        deps.onReviewOpened?.({
          reviewId,
          kind: event.kind,
          orderNo: event.orderNo,
          state: event.state,
          merchantOrderNo: event.merchantOrderNo,
          code: failure.code,
          reason: failure.reason,
        });
      } catch (e) {
        log.warn({ reviewId, err: e }, 'review-opened hook failed; the review is stored');
      }
    }
    return { status: 'review', code: failure.code, reason: failure.reason, reviewId, opened };
  };
  const waitOrReview = async (failure: Omit<VerifyFailure, 'retry'>, boundMs: number): Promise<ApplyOutcome> => {
    if (!options.noWait && waited < boundMs) {
      log.info({ code: failure.code, waitedMs: waited, boundMs }, `event deferred: ${failure.reason}`);
      return { status: 'deferred', code: failure.code, reason: failure.reason };
    }
    return review({ ...failure, details: { ...failure.details, waitedMs: waited } });
  };

  // 1. Applied before: nothing to do (the transaction below is the guard; this only saves a Get order).
  if (await receiptExists(deps.db, event.orderNo, event.state)) {
    log.info('duplicate event: receipt exists');
    return { status: 'duplicate', reason: 'receipt-exists' };
  }

  // 2. Our own order; it may be registered after the platform's callback, so wait for it a while.
  const order = await findOrder(deps.db, event.merchantOrderNo);
  if (!order) {
    return waitOrReview(
      {
        code: ErrorCodes.VERIFY_ORDER_UNKNOWN,
        reason: `no order of ours has merchant order number ${event.merchantOrderNo}`,
        details: { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state },
      },
      deps.orderGracePeriodMs ?? DEFAULT_GRACE_MS,
    );
  }
  const ownProblem = checkOwnOrder(event, order);
  if (ownProblem) return review(ownProblem);
  if (order.status === target && order.platformOrderNo === event.orderNo) {
    log.info({ status: order.status }, 'duplicate event: order already final with this outcome');
    return { status: 'duplicate', reason: 'already-final' };
  }

  // 3. Ask the platform; a callback is unsigned, so only Get order's answer counts.
  const confirmMaxWaitMs = deps.confirmMaxWaitMs ?? DEFAULT_CONFIRM_MAX_WAIT_MS;
  let confirmed: PlatformOrder;
  const started = performance.now();
  try {
    confirmed = await deps.platform.getOrder(event.merchantOrderNo, { signal: options.signal });
    deps.metrics?.getOrderDuration.observe({ result: 'ok' }, (performance.now() - started) / 1000);
  } catch (e) {
    const code = e instanceof AppError ? e.code : 'error';
    deps.metrics?.getOrderDuration.observe({ result: code }, (performance.now() - started) / 1000);
    // The platform refusing to confirm (its code != 0, e.g. an order it does not know) is not a confirmation:
    // wait for the same bound as "not final", then review. Transport failures are rethrown for the retry policy.
    if (e instanceof PlatformCodeError) {
      return waitOrReview(
        {
          code: ErrorCodes.PLATFORM_ERROR_CODE,
          reason: `Get order refused: ${e.platformCode} ${e.platformMessage}`.trim(),
          details: { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state, platformCode: e.platformCode },
        },
        confirmMaxWaitMs,
      );
    }
    throw e;
  }

  // 4. Verify state and amounts against Get order and our order.
  const problem = verifyConfirmation(event, order, confirmed);
  if (problem) return problem.retry ? waitOrReview(problem, confirmMaxWaitMs) : review(problem);

  // 5. One transaction: receipt (dedup), guarded transition, ledger, outbox.
  const result = await commitEvent(deps.db, { event, order, confirmed, target, jobId: options.jobId });
  if (result.status === 'duplicate') {
    log.info({ reason: result.reason }, 'duplicate event (detected in the transaction)');
    return result;
  }
  if (result.status === 'conflict') {
    return review({
      code: result.currentPlatformOrderNo !== null && result.currentPlatformOrderNo !== event.orderNo
        ? ErrorCodes.VERIFY_ORDER_NO_MISMATCH
        : ErrorCodes.VERIFY_CONFLICTING_FINAL_STATE,
      reason: `our order is already ${result.currentStatus}${result.currentPlatformOrderNo ? ` (platform order ${result.currentPlatformOrderNo})` : ''}; the event would make it ${target}`,
      details: {
        orderNo: event.orderNo,
        merchantOrderNo: event.merchantOrderNo,
        state: event.state,
        currentStatus: result.currentStatus,
        currentPlatformOrderNo: result.currentPlatformOrderNo,
        confirmedState: confirmed.state,
      },
    });
  }
  const outcome: ApplyOutcome = { status: 'applied', outcome: result.outcome, orderId: order.id, receiptId: result.receiptId };
  await deps.afterCommit?.(outcome);
  log.info(
    { outcome: result.outcome, orderId: order.id, receiptId: result.receiptId, ledgerEntryId: result.ledgerEntryId, amount: order.amount, currency: order.currency },
    `order ${order.merchantOrderNo} ${result.outcome}`,
  );
  return outcome;
}
