import type { Database, Order } from '@mcb/core/db';
import { AppError, ErrorCodes, type ErrorCode } from '@mcb/core/errors';
import { inSpan } from '@mcb/core/tracing';
import type { Logger } from '@mcb/core/logger';
import { PlatformCodeError, type PlatformClient, type PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import { Batcher, type BatcherOptions } from '@mcb/core/batcher';
import { commitEvents, type CommitInput, type CommitResult } from './commit.ts';
import { lookUpEvents, type LookupKey, type LookupResult } from './lookup.ts';
import type { SettlementMetrics } from './metrics.ts';
import { recordReview, recordReviewAttempt } from './record-review.ts';
import {
  checkOwnOrder,
  differencesFromApplied,
  targetStatus,
  verifyConfirmation,
  type AppliedContent,
  type TargetStatus,
  type VerifyFailure,
} from './verify.ts';

/**
 * The batchers one process shares between its concurrent events: the look-ups before Get order and the group
 * commit after it. Without them each event reads and commits alone.
 */
export interface SettlementBatchers {
  lookups: Batcher<LookupKey, LookupResult>;
  commits: Batcher<CommitInput, CommitResult>;
}

/** Options of {@link createSettlementBatchers}. */
export interface SettlementBatcherOptions {
  /** Largest group commit (events per transaction). @defaultValue 64 */
  maxCommitBatch?: number;
  /** Largest look-up batch. @defaultValue 128 */
  maxLookupBatch?: number;
  /** Longest wait of a group commit for a row lock, in ms (CommitOptions.lockTimeoutMs). @defaultValue 5000 */
  commitLockTimeoutMs?: number;
  /** Told each batch's size as it starts. */
  onBatch?: (kind: 'lookup' | 'commit', size: number) => void;
}

/** One process's batchers on `db` (one commit in flight at a time, two look-ups). */
export function createSettlementBatchers(db: Database, options: SettlementBatcherOptions = {}): SettlementBatchers {
  const onBatch = options.onBatch;
  const lookups: BatcherOptions = {
    maxBatch: options.maxLookupBatch ?? 128,
    maxInFlight: 2,
    onBatch: onBatch && ((n) => onBatch('lookup', n)),
  };
  const commits: BatcherOptions = {
    maxBatch: options.maxCommitBatch ?? 64,
    maxInFlight: 1,
    onBatch: onBatch && ((n) => onBatch('commit', n)),
  };
  return {
    lookups: new Batcher((keys) => lookUpEvents(db, keys), lookups),
    commits: new Batcher((inputs) => commitEvents(db, inputs, { lockTimeoutMs: options.commitLockTimeoutMs }), commits),
  };
}

/** What settling an event needs. */
export interface ApplyDeps {
  db: Database;
  platform: PlatformClient;
  logger: Logger;
  metrics?: SettlementMetrics;
  /** Shared look-up and commit batchers; without them each event reads and commits alone. @defaultValue none */
  batchers?: SettlementBatchers;
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
  /**
   * The open review this event is re-verified for (console re-verify): a failure is added to that review's history
   * as an attempt, instead of counting as another occurrence of the event, and its reason is left as it is.
   * @defaultValue none
   */
  reverifyOf?: number;
  /**
   * Whether an earlier attempt of this job may have committed this receipt without learning it (its COMMIT's reply
   * was lost and Postgres could not be asked: DB_COMMIT_IN_DOUBT). When the pair's receipt is one of those, this job
   * applied it, and reports `applied` (afterCommit, the outcome's log line) instead of `duplicate`. @defaultValue none
   */
  wasInDoubt?: (receiptId: number) => Promise<boolean>;
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

/** What confirming an event came to: Get order's answer for our order, or already an outcome. */
export type Confirmation = { status: 'confirmed'; order: Order; confirmed: PlatformOrder } | ApplyOutcome;

const DEFAULT_GRACE_MS = 15 * 60_000;
const DEFAULT_CONFIRM_MAX_WAIT_MS = 2 * 3600_000;

type Failure = Omit<VerifyFailure, 'retry'>;

/** The per-event helpers both halves use: its logger, its target status, and how it goes to review or waits. */
class EventContext {
  readonly event: CallbackJob;
  readonly deps: ApplyDeps;
  readonly options: ApplyOptions;
  readonly log: Logger;
  readonly target: TargetStatus;
  readonly #waited: number;

  constructor(event: CallbackJob, deps: ApplyDeps, options: ApplyOptions) {
    this.event = event;
    this.deps = deps;
    this.options = options;
    const now = deps.now ?? Date.now;
    const received = Date.parse(event.receivedAt);
    const firstSeenAt = options.firstSeenAt ?? (Number.isNaN(received) ? now() : received);
    this.#waited = now() - firstSeenAt;
    this.log = deps.logger.child({
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
    this.target = target;
  }

  async review(failure: Failure): Promise<ApplyOutcome> {
    const { event, deps, log } = this;
    const reverifyOf = this.options.reverifyOf;
    if (reverifyOf !== undefined) {
      await recordReviewAttempt(deps.db, reverifyOf, {
        source: 'review',
        outcome: 'unconfirmed',
        reasonCode: failure.code,
        reason: failure.reason,
        details: failure.details,
      });
      log.warn(
        { code: failure.code, reviewId: reverifyOf, details: failure.details },
        `re-verified event still fails: ${failure.reason}`,
      );
      return { status: 'review', code: failure.code, reason: failure.reason, reviewId: reverifyOf, opened: false };
    }
    const { id: reviewId, opened } = await inSpan(
      'settlement review',
      { 'mcb.review_code': failure.code },
      async (span) => {
        const recorded = await recordReview(deps.db, event, failure);
        span?.setAttributes({ 'mcb.review_id': recorded.id, 'mcb.review_opened': recorded.opened });
        return recorded;
      },
    );
    deps.metrics?.reviews.inc({ kind: event.kind, code: failure.code });
    log.warn(
      { code: failure.code, reviewId, opened, details: failure.details },
      `event sent to review: ${failure.reason}`,
    );
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
  }

  async waitOrReview(failure: Failure, boundMs: number): Promise<ApplyOutcome> {
    if (!this.options.noWait && this.#waited < boundMs) {
      this.log.info({ code: failure.code, waitedMs: this.#waited, boundMs }, `event deferred: ${failure.reason}`);
      return { status: 'deferred', code: failure.code, reason: failure.reason };
    }
    return this.review({ ...failure, details: { ...failure.details, waitedMs: this.#waited } });
  }

  get confirmMaxWaitMs(): number {
    return this.deps.confirmMaxWaitMs ?? DEFAULT_CONFIRM_MAX_WAIT_MS;
  }
}

/** Spec steps 1–2: the pair applied before? our own order (registered, of this kind, this platform order)? */
async function ownOrder(ctx: EventContext): Promise<{ order: Order } | { outcome: ApplyOutcome }> {
  const { event, deps, log } = ctx;
  const key = { orderNo: event.orderNo, state: event.state, merchantOrderNo: event.merchantOrderNo };
  const found = deps.batchers ? await deps.batchers.lookups.submit(key) : await lookUpOne(deps.db, key);
  // 1. Applied before: nothing to do (the transaction is the guard; this only saves a Get order).
  if (found.applied) {
    const receipt = found.receipt;
    if (receipt && found.order && ctx.options.wasInDoubt && (await ctx.options.wasInDoubt(receipt.id))) {
      // An earlier attempt of this very job committed it and never heard back: report its credit now.
      log.info({ receiptId: receipt.id }, 'receipt of an earlier attempt whose COMMIT was in doubt: it committed');
      return {
        outcome: await reportApplied(ctx, found.order, {
          outcome: receipt.outcome,
          receiptId: receipt.id,
          ledgerEntryId: undefined,
        }),
      };
    }
    if (receipt) {
      const differs = await judgeAgainstApplied(ctx, { against: 'receipt', receiptId: receipt.id, ...receipt });
      if (differs) return { outcome: differs };
    }
    log.info('duplicate event: receipt exists');
    return { outcome: { status: 'duplicate', reason: 'receipt-exists' } };
  }
  // 2. Our own order; it may be registered after the platform's callback, so wait for it a while.
  const order = found.order;
  if (!order) {
    return {
      outcome: await ctx.waitOrReview(
        {
          code: ErrorCodes.VERIFY_ORDER_UNKNOWN,
          reason: `no order of ours has merchant order number ${event.merchantOrderNo}`,
          details: { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state },
        },
        deps.orderGracePeriodMs ?? DEFAULT_GRACE_MS,
      ),
    };
  }
  const ownProblem = checkOwnOrder(event, order);
  if (ownProblem) return { outcome: await ctx.review(ownProblem) };
  if (order.status === ctx.target && order.platformOrderNo === event.orderNo) {
    // Final from another state of the pair (pay-in 3 after 6): compare with our order and the receipt that finalised it.
    const differs = await judgeAgainstApplied(ctx, {
      against: 'order',
      kind: order.kind,
      merchantOrderNo: order.merchantOrderNo,
      merchantNo: found.orderMerchantNo,
      fiatAmount: order.kind === 'payin' ? order.amount : null,
    });
    if (differs) return { outcome: differs };
    log.info({ status: order.status }, 'duplicate event: order already final with this outcome');
    return { outcome: { status: 'duplicate', reason: 'already-final' } };
  }
  return { order };
}

/**
 * A callback for an applied pair or an already-final order is a duplicate only when its content is what was applied
 * (a platform retry, a late copy: no alarm). Otherwise it is evidence of a forgery or a probe: a review with both
 * values of each differing field (the review alert goes out when it opens), and `suspectedForgeries` counts it.
 * Nothing is paid either way. A console re-verify is left to its own judgement of every event of the review.
 * Returns undefined for a copy.
 */
async function judgeAgainstApplied(
  ctx: EventContext,
  applied: AppliedContent & { receiptId?: number },
): Promise<ApplyOutcome | undefined> {
  if (ctx.options.reverifyOf !== undefined) return undefined;
  const { event, deps } = ctx;
  const differences = differencesFromApplied(event, applied);
  if (differences.length === 0) return undefined;
  deps.metrics?.suspectedForgeries?.inc({ kind: event.kind, against: applied.against });
  const what =
    applied.against === 'receipt'
      ? `receipt ${applied.receiptId} of this pair`
      : `our order, final (${ctx.target}) from its other state`;
  return ctx.review({
    code: ErrorCodes.VERIFY_DIFFERS_FROM_APPLIED,
    reason: `callback differs from what was applied (${what}): ${differences.map((d) => `${d.field} ${d.callback ?? 'none'}, applied ${d.applied ?? 'none'}`).join('; ')}`,
    details: {
      orderNo: event.orderNo,
      merchantOrderNo: event.merchantOrderNo,
      state: event.state,
      against: applied.against,
      ...(applied.receiptId !== undefined ? { receiptId: applied.receiptId } : {}),
      differences,
    },
  });
}

async function lookUpOne(db: Database, key: LookupKey): Promise<LookupResult> {
  const [result] = await lookUpEvents(db, [key]);
  if (!result?.ok) throw result?.error ?? new Error('look-up returned nothing');
  return result.value;
}

/** Spec step 3: ask the platform; a callback is unsigned, so only Get order's answer counts. */
async function askPlatform(ctx: EventContext, order: Order): Promise<Confirmation> {
  const { event, deps, options } = ctx;
  const started = performance.now();
  try {
    const confirmed = await inSpan(
      'platform get order',
      { 'mcb.merchant_order_no': event.merchantOrderNo },
      async (span) => {
        const answer = await deps.platform.getOrder(event.merchantOrderNo, { signal: options.signal });
        span?.setAttribute('mcb.confirmed_state', answer.state);
        return answer;
      },
    );
    deps.metrics?.getOrderDuration.observe({ result: 'ok' }, (performance.now() - started) / 1000);
    return { status: 'confirmed', order, confirmed };
  } catch (e) {
    const code = e instanceof AppError ? e.code : 'error';
    deps.metrics?.getOrderDuration.observe({ result: code }, (performance.now() - started) / 1000);
    // The platform refusing to confirm (its code != 0, e.g. an order it does not know) is not a confirmation:
    // wait for the same bound as "not final", then review. Transport failures are rethrown for the retry policy.
    if (e instanceof PlatformCodeError) {
      return ctx.waitOrReview(
        {
          code: ErrorCodes.PLATFORM_ERROR_CODE,
          reason: `Get order refused: ${e.platformCode} ${e.platformMessage}`.trim(),
          details: {
            orderNo: event.orderNo,
            merchantOrderNo: event.merchantOrderNo,
            state: event.state,
            platformCode: e.platformCode,
          },
        },
        ctx.confirmMaxWaitMs,
      );
    }
    // An HTTP 3xx/4xx (a proxy, a maintenance page, a misrouted path) is neither a confirmation nor a transport
    // failure: wait and ask again, for the same bound, then review. Never a permanent failure on the first try.
    const status = e instanceof AppError && e.code === ErrorCodes.PLATFORM_HTTP_ERROR ? Number(e.details?.status) : NaN;
    if (status >= 300 && status < 500) {
      return ctx.waitOrReview(
        {
          code: ErrorCodes.PLATFORM_HTTP_ERROR,
          reason: `Get order answered HTTP ${status}`,
          details: { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state, status },
        },
        ctx.confirmMaxWaitMs,
      );
    }
    throw e;
  }
}

/** Spec steps 4–5: verify against Get order and our order, then commit (receipt, transition, ledger, outbox). */
async function decide(ctx: EventContext, order: Order, confirmed: PlatformOrder): Promise<ApplyOutcome> {
  const { event, deps, log, target } = ctx;
  const problem = verifyConfirmation(event, order, confirmed);
  if (problem) return problem.retry ? ctx.waitOrReview(problem, ctx.confirmMaxWaitMs) : ctx.review(problem);

  const input: CommitInput = { event, order, confirmed, target, jobId: ctx.options.jobId };
  // The span covers this event's wait for its batch's transaction (shared with concurrent jobs: one commit each batch).
  const result = await inSpan('settlement commit', {}, async (span) => {
    const r = deps.batchers
      ? await deps.batchers.commits.submit(input)
      : await commitEvents(deps.db, [input]).then(([one]) => {
          if (!one!.ok) throw one!.error;
          return one!.value;
        });
    span?.setAttributes({
      'mcb.commit_result': r.status,
      ...(r.status === 'applied' ? { 'mcb.outcome': r.outcome } : {}),
    });
    return r;
  });
  if (result.status === 'duplicate') {
    log.info({ reason: result.reason }, 'duplicate event (detected in the transaction)');
    return result;
  }
  if (result.status === 'conflict') {
    return ctx.review({
      code:
        result.currentPlatformOrderNo !== null && result.currentPlatformOrderNo !== event.orderNo
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
  return reportApplied(ctx, order, result);
}

/** The customer's wait, PayTime to this commit (mcb_payment_to_credit_seconds); a clock ahead of ours counts as 0. */
function observePaymentToCredit(ctx: EventContext): void {
  const histogram = ctx.deps.metrics?.paymentToCredit;
  const paidAt = ctx.event.payTime ? Date.parse(ctx.event.payTime) : NaN;
  if (!histogram || Number.isNaN(paidAt)) return;
  histogram.observe({ kind: ctx.event.kind }, Math.max(0, ((ctx.deps.now ?? Date.now)() - paidAt) / 1000));
}

/** What follows a credit this job made: afterCommit, then the outcome's log line. */
async function reportApplied(
  ctx: EventContext,
  order: Order,
  result: { outcome: TargetStatus; receiptId: number; ledgerEntryId: number | undefined },
): Promise<ApplyOutcome> {
  const outcome: ApplyOutcome = {
    status: 'applied',
    outcome: result.outcome,
    orderId: order.id,
    receiptId: result.receiptId,
  };
  observePaymentToCredit(ctx);
  await ctx.deps.afterCommit?.(outcome);
  ctx.log.info(
    {
      outcome: result.outcome,
      orderId: order.id,
      receiptId: result.receiptId,
      ledgerEntryId: result.ledgerEntryId,
      amount: order.amount,
      currency: order.currency,
    },
    `order ${order.merchantOrderNo} ${result.outcome}`,
  );
  return outcome;
}

/**
 * Confirm an event: the spec's steps 1–3 (receipt look-up, our order, Get order). Returns Get order's answer for
 * {@link decideAndCommit}, or the outcome when the event is already decided (duplicate, review, deferred).
 *
 * @throws transient errors (Postgres or platform unreachable, 5xx, timeouts) for the caller to retry;
 *   AppError JOB_PAYLOAD_INVALID when the event's state is not one its kind defines.
 */
export async function confirmEvent(
  event: CallbackJob,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<Confirmation> {
  const ctx = new EventContext(event, deps, options);
  const own = await ownOrder(ctx);
  if ('outcome' in own) return own.outcome;
  return askPlatform(ctx, own.order);
}

/**
 * Decide and commit: the spec's steps 4–5 for an event, our order and what Get order answered. Verification
 * failures go to review (or wait, for "not final"); a verified event is committed once under the (OrderNo, state)
 * receipt, through the group commit when `deps.batchers` is set.
 */
export async function decideAndCommit(
  event: CallbackJob,
  order: Order,
  confirmed: PlatformOrder,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<ApplyOutcome> {
  return decide(new EventContext(event, deps, options), order, confirmed);
}

/**
 * Settle an event whose Get order answer the caller already holds (the reconciliation sweep): steps 1–2 as for a
 * callback, then {@link decideAndCommit} with that answer, without asking the platform again.
 */
export async function applyConfirmed(
  event: CallbackJob,
  confirmed: PlatformOrder,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<ApplyOutcome> {
  const ctx = new EventContext(event, deps, options);
  const own = await ownOrder(ctx);
  if ('outcome' in own) return own.outcome;
  return decide(ctx, own.order, confirmed);
}

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
export async function applyEvent(
  event: CallbackJob,
  deps: ApplyDeps,
  options: ApplyOptions = {},
): Promise<ApplyOutcome> {
  const ctx = new EventContext(event, deps, options);
  const own = await ownOrder(ctx);
  if ('outcome' in own) return own.outcome;
  const confirmation = await askPlatform(ctx, own.order);
  if (confirmation.status !== 'confirmed') return confirmation;
  return decide(ctx, confirmation.order, confirmation.confirmed);
}
