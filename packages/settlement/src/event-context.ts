import type { Order } from '@mcb/core/db';
import type { Logger } from '@mcb/core/logger';
import type { CallbackJob } from '@mcb/core/queue';
import { inSpan } from '@mcb/core/tracing';
import { waitedSince, type Finding, type WaitFacts } from './decide.ts';
import { judgePayTime } from './pay-time.ts';
import { recordReview, recordReviewAttempt } from './record-review.ts';
import type { ApplyDeps, ApplyOptions, ApplyOutcome } from './settle-types.ts';
import type { TargetStatus } from './verify.ts';

/** One event being settled: its logger, how long it has waited, and what the worker does for a review or a credit. */
export class EventContext {
  readonly event: CallbackJob;
  readonly deps: ApplyDeps;
  readonly options: ApplyOptions;
  readonly log: Logger;
  readonly #waitedMs: number;

  constructor(event: CallbackJob, deps: ApplyDeps, options: ApplyOptions) {
    this.event = event;
    this.deps = deps;
    this.options = options;
    this.#waitedMs = waitedSince(event, (deps.now ?? Date.now)(), options.firstSeenAt);
    this.log = deps.logger.child({
      kind: event.kind,
      orderNo: event.orderNo,
      state: event.state,
      merchantOrderNo: event.merchantOrderNo,
      source: event.source,
      ...(options.jobId ? { jobId: options.jobId } : {}),
    });
  }

  /** The waiting facts of the decision: how long this event has waited, its bounds, and whether it may wait. */
  get waiting(): WaitFacts {
    return {
      waitedMs: this.#waitedMs,
      noWait: this.options.noWait,
      unknownOrderCapFull: this.options.unknownOrderCapFull,
      orderGracePeriodMs: this.deps.orderGracePeriodMs,
      confirmMaxWaitMs: this.deps.confirmMaxWaitMs,
    };
  }

  /** Open (or count another occurrence of) the pair's review; for a console re-verify, add an attempt to it instead. */
  async review(finding: Finding): Promise<ApplyOutcome> {
    const { event, deps, log } = this;
    const reverifyOf = this.options.reverifyOf;
    if (reverifyOf !== undefined) {
      await recordReviewAttempt(deps.db, reverifyOf, {
        source: 'review',
        outcome: 'unconfirmed',
        reasonCode: finding.code,
        reason: finding.reason,
        details: finding.details,
      });
      log.warn(
        { code: finding.code, reviewId: reverifyOf, details: finding.details },
        `re-verified event still fails: ${finding.reason}`,
      );
      return { status: 'review', code: finding.code, reason: finding.reason, reviewId: reverifyOf, opened: false };
    }
    const { id: reviewId, opened } = await inSpan(
      'settlement review',
      { 'mcb.review_code': finding.code },
      async (span) => {
        const recorded = await recordReview(deps.db, event, finding);
        span?.setAttributes({ 'mcb.review_id': recorded.id, 'mcb.review_opened': recorded.opened });
        return recorded;
      },
    );
    deps.metrics?.reviews.inc({ kind: event.kind, code: finding.code });
    log.warn(
      { code: finding.code, reviewId, opened, details: finding.details },
      `event sent to review: ${finding.reason}`,
    );
    if (opened) this.#tellReviewOpened(reviewId, finding);
    return { status: 'review', code: finding.code, reason: finding.reason, reviewId, opened };
  }

  #tellReviewOpened(reviewId: number, finding: Finding): void {
    const { event } = this;
    try {
      this.deps.onReviewOpened?.({
        reviewId,
        kind: event.kind,
        orderNo: event.orderNo,
        state: event.state,
        merchantOrderNo: event.merchantOrderNo,
        code: finding.code,
        reason: finding.reason,
      });
    } catch (e) {
      this.log.warn({ reviewId, err: e }, 'review-opened hook failed; the review is stored');
    }
  }

  /** What follows a credit this job made: the payment-to-credit metric, afterCommit, then the outcome's log line. */
  async reportApplied(
    order: Order,
    result: { outcome: TargetStatus; receiptId: number; ledgerEntryId: number | undefined },
  ): Promise<ApplyOutcome> {
    const outcome: ApplyOutcome = {
      status: 'applied',
      outcome: result.outcome,
      orderId: order.id,
      receiptId: result.receiptId,
    };
    this.#observePaymentToCredit(order);
    this.#observeCallbackToCredit();
    await this.deps.afterCommit?.(outcome);
    this.log.info(
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

  /** Arrival at ingest to this commit (mcb_callback_to_credit_seconds), for a callback's event only. */
  #observeCallbackToCredit(): void {
    const histogram = this.deps.metrics?.callbackToCredit;
    const received = Date.parse(this.event.receivedAt);
    if (!histogram || this.event.source !== 'callback' || Number.isNaN(received)) return;
    histogram.observe({ kind: this.event.kind }, Math.max(0, ((this.deps.now ?? Date.now)() - received) / 1000));
  }

  /**
   * The customer's wait, PayTime to this commit (mcb_payment_to_credit_seconds), only from a plausible PayTime
   * ({@link judgePayTime}): Get order does not confirm it, and a forged one must not fire PaymentToCreditSlow. A clock
   * ahead of ours (within the allowance) counts as 0.
   */
  #observePaymentToCredit(order: Order): void {
    const histogram = this.deps.metrics?.paymentToCredit;
    if (!histogram || !this.event.payTime) return;
    const { paidAt, implausible } = judgePayTime(this.event.payTime, {
      orderCreatedAt: order.createdAt,
      receivedAt: this.event.receivedAt,
    });
    if (implausible) {
      this.log.warn(
        { payTime: this.event.payTime, orderCreatedAt: order.createdAt, receivedAt: this.event.receivedAt },
        `payment-to-credit not measured: ${implausible}`,
      );
      return;
    }
    histogram.observe({ kind: this.event.kind }, Math.max(0, ((this.deps.now ?? Date.now)() - paidAt) / 1000));
  }
}
