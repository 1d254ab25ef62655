import type { Settled } from '@mcb/core/batcher';
import type { Order } from '@mcb/core/db';
import { ErrorCodes } from '@mcb/core/errors';
import type { PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import type { AppliedReceipt, LookupResult } from './lookup.ts';
import { classifyError } from './retry-policy.ts';
import { unusableAnswer } from './unusable-answer.ts';
import {
  checkOwnOrder,
  differencesFromApplied,
  targetStatus,
  unconfirmedDifferences,
  verifyConfirmation,
  type AppliedContent,
  type AppliedDifference,
  type TargetStatus,
  type VerifyFailure,
} from './verify.ts';

// What an event does to the ledger, decided once: the worker acts on the verdict (settle.ts) and the console's
// replay dry run only reports it, so the preview follows the money path by construction (STYLE.md rule 24).

/** Why an event goes to review or waits: a code of the catalogue, a sentence, and the facts behind it. */
export type Finding = Omit<VerifyFailure, 'retry'>;

/**
 * A duplicate of an applied pair that differs from what was applied only in fields Get order does not confirm
 * (Quantity): no evidence against either callback, so a note on the order names both jobs and both values.
 */
export interface AppliedNote {
  /** The pair's receipt: what was applied. */
  receiptId: number;
  /** The job the receipt was applied from (null: not recorded). */
  appliedJobId: string | null;
  differences: AppliedDifference[];
}

/** Our order and the status the event would give it, known once the decision has found the order. */
export interface Ours {
  order: Order;
  target: TargetStatus;
}

/**
 * What an event does to the ledger. `ours` is set on every verdict reached after our order was found (not on those
 * decided by the pair's receipt alone, an unknown order, or an invalid state).
 */
export type Verdict =
  /** Steps 1–2 pass: ask Get order, then decide again with its answer. */
  | { verdict: 'confirm'; ours: Ours }
  /** Verified, and our order is pending: commit it (receipt, guarded transition, ledger, outbox). */
  | { verdict: 'apply'; ours: Ours; confirmed: PlatformOrder }
  /** The pair's receipt is this job's own credit: an earlier attempt committed it and never heard back. */
  | { verdict: 'applied'; ours: Ours; receipt: AppliedReceipt }
  /** Applied before, under this pair's receipt or through the order's other state: nothing to do. */
  | {
      verdict: 'duplicate';
      reason: 'receipt-exists';
      receiptId?: number | undefined;
      ours?: undefined;
      /** Set when it differs from what was applied in a field Get order does not confirm: note it on the order. */
      note?: AppliedNote | undefined;
    }
  | { verdict: 'duplicate'; reason: 'already-final'; ours: Ours }
  /** Moves no money; a person decides. `against`: the callback differs from what was applied (a suspected forgery). */
  | { verdict: 'review'; finding: Finding; against?: AppliedContent['against']; ours?: Ours | undefined }
  /** Not decidable yet (order not registered, Get order refusing or not final): ask again later. */
  | { verdict: 'wait'; finding: Finding; waitedMs: number; boundMs: number; ours?: Ours | undefined }
  /**
   * Get order failed in transport: nothing decided; the attempt fails with this error. `final`: no attempt follows
   * (the job's last attempt, or an error no retry fixes), so the job fails for good; else the retry policy retries it.
   */
  | { verdict: 'retry'; error: unknown; ours: Ours; final: boolean }
  /** The event's state is not a final state of its kind: it can never be settled. */
  | { verdict: 'invalid'; finding: Finding; ours?: undefined };

/** How long an event has waited, and how long it may: the bounds that turn a wait into a review. */
export interface WaitFacts {
  /** Since the event was first seen, in ms ({@link waitedSince}). */
  waitedMs: number;
  /** Decide now (a job's last attempt): what would wait goes to review, what would retry fails. @defaultValue false */
  noWait?: boolean | undefined;
  /**
   * The unknown-order cap (WORKER_MAX_UNKNOWN_WAITING) has no room for this event: if its order is unknown it goes to
   * review now rather than wait for the grace period. Asked only when the decision is {@link waitsForUnknownOrder}.
   * @defaultValue false
   */
  unknownOrderCapFull?: boolean | undefined;
  /** How long an event may wait for its order to be registered (ORDER_GRACE_PERIOD), in ms. @defaultValue 900000 */
  orderGracePeriodMs?: number | undefined;
  /** How long Get order may refuse or answer "not final" (CONFIRM_MAX_WAIT), in ms. @defaultValue 7200000 */
  confirmMaxWaitMs?: number | undefined;
}

/** What the decision is made from: what was read before Get order, and Get order's answer once asked. */
export interface EventFacts extends WaitFacts {
  /** The look-up: the pair's receipt, our order, and the merchant number of the receipt that finalised it. */
  found: LookupResult;
  /** The pair's receipt was committed by an earlier attempt of this job whose COMMIT was in doubt. @defaultValue false */
  receiptIsOurs?: boolean | undefined;
  /** Get order's answer, or how asking it failed; left out until it was asked. */
  getOrder?: Settled<PlatformOrder> | undefined;
  /** A console re-verify: it judges the review's events itself, so no "differs from applied" verdict. @defaultValue false */
  reverifying?: boolean | undefined;
}

const DEFAULT_GRACE_MS = 15 * 60_000;
const DEFAULT_CONFIRM_MAX_WAIT_MS = 2 * 3600_000;

/** How long an event has waited at `now`: from `firstSeenAt`, else its `receivedAt`, else not at all (ms). */
export function waitedSince(event: CallbackJob, now: number, firstSeenAt?: number): number {
  const received = Date.parse(event.receivedAt);
  return now - (firstSeenAt ?? (Number.isNaN(received) ? now : received));
}

/**
 * The spec's "Handling order" as a pure function: 1. a receipt of the pair → duplicate (or a review when the
 * callback differs from what was applied); 2. our order (unknown → wait for the grace period, then review; another
 * kind or platform order → review; already final this way → duplicate); 3. Get order (refusing, HTTP 3xx/4xx or code 0 without usable data →
 * wait up to CONFIRM_MAX_WAIT, then review; a transport failure → retry); 4. verify (not final → wait, mismatch →
 * review); 5. apply, which moves our order only from pending. Without `facts.getOrder` it stops at `confirm`.
 */
export function decideEvent(event: CallbackJob, facts: EventFacts): Verdict {
  const target = targetStatus(event);
  if (!target) return invalidState(event);
  const before = judgeLookup(event, target, facts);
  if (before.verdict !== 'confirm' || !facts.getOrder) return before;
  return decideConfirmed(event, before.ours.order, facts.getOrder, facts);
}

/**
 * {@link decideEvent} with Get order asked when, and only when, the decision needs its answer: `ask` is the worker's
 * call to the platform, or the dry run's cached and rate-limited one.
 */
export async function decideAsking(
  event: CallbackJob,
  facts: EventFacts,
  ask: () => Promise<Settled<PlatformOrder>>,
): Promise<Verdict> {
  const before = decideEvent(event, facts);
  if (before.verdict !== 'confirm') return before;
  return decideEvent(event, { ...facts, getOrder: await ask() });
}

/**
 * Steps 3–5 for an event whose order was already judged (steps 1–2): what Get order's answer makes of it. The
 * console's re-verify enters here with the event of its review that Get order confirms.
 */
export function decideConfirmed(
  event: CallbackJob,
  order: Order,
  getOrder: Settled<PlatformOrder>,
  waiting: WaitFacts,
): Verdict {
  const target = targetStatus(event);
  if (!target) return invalidState(event);
  const ours = { order, target };
  if (!getOrder.ok) return unanswered(event, ours, getOrder.error, waiting);
  const confirmed = getOrder.value;
  const problem = verifyConfirmation(event, order, confirmed);
  if (problem) {
    return problem.retry
      ? waitOrReview(problem, confirmMaxWait(waiting), waiting, ours)
      : { verdict: 'review', finding: problem, ours };
  }
  // Final states never change (orders move only from pending), so the order as read is what the transaction sees.
  if (order.status === 'pending') return { verdict: 'apply', ours, confirmed };
  if (order.status === target && order.platformOrderNo === event.orderNo) {
    return { verdict: 'duplicate', reason: 'already-final', ours };
  }
  return { verdict: 'review', finding: conflictFinding(event, target, confirmed, order), ours };
}

/**
 * The review of a verified event whose order is final otherwise: read before the transaction, or found by it (a
 * concurrent event finalised the order first).
 */
export function conflictFinding(
  event: CallbackJob,
  target: TargetStatus,
  confirmed: PlatformOrder,
  current: Pick<Order, 'status' | 'platformOrderNo'>,
): Finding {
  const { status, platformOrderNo } = current;
  const which = platformOrderNo ? ` (platform order ${platformOrderNo})` : '';
  return {
    code:
      platformOrderNo !== null && platformOrderNo !== event.orderNo
        ? ErrorCodes.VERIFY_ORDER_NO_MISMATCH
        : ErrorCodes.VERIFY_CONFLICTING_FINAL_STATE,
    reason: `our order is already ${status}${which}; the event would make it ${target}`,
    details: {
      orderNo: event.orderNo,
      merchantOrderNo: event.merchantOrderNo,
      state: event.state,
      currentStatus: status,
      currentPlatformOrderNo: platformOrderNo,
      confirmedState: confirmed.state,
    },
  };
}

function invalidState(event: CallbackJob): Verdict {
  return {
    verdict: 'invalid',
    finding: {
      code: ErrorCodes.JOB_PAYLOAD_INVALID,
      reason: `state ${event.state} is not a final ${event.kind} state`,
      details: { orderNo: event.orderNo, state: event.state },
    },
  };
}

/** Steps 1–2: the pair applied before? our own order (registered, of this kind, this platform order)? */
function judgeLookup(event: CallbackJob, target: TargetStatus, facts: EventFacts): Verdict {
  const { found } = facts;
  // 1. Applied before: nothing to do (the transaction is the guard; this only saves a Get order).
  if (found.applied) {
    const receipt = found.receipt;
    if (receipt && found.order && facts.receiptIsOurs) {
      return { verdict: 'applied', ours: { order: found.order, target }, receipt };
    }
    if (!receipt) return { verdict: 'duplicate', reason: 'receipt-exists' };
    const applied = { against: 'receipt' as const, receiptId: receipt.id, ...receipt };
    const differs = differsFromApplied(event, target, applied, facts);
    if (differs) return differs;
    const unconfirmed = facts.reverifying ? [] : unconfirmedDifferences(event, applied);
    const note =
      unconfirmed.length > 0
        ? { receiptId: receipt.id, appliedJobId: receipt.jobId, differences: unconfirmed }
        : undefined;
    return { verdict: 'duplicate', reason: 'receipt-exists', receiptId: receipt.id, ...(note ? { note } : {}) };
  }
  // 2. Our own order; it may be registered after the platform's callback, so wait for it a while.
  const order = found.order;
  if (!order) {
    const finding = {
      code: ErrorCodes.VERIFY_ORDER_UNKNOWN,
      reason: `no order of ours has merchant order number ${event.merchantOrderNo}`,
      details: { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state },
    };
    const waiting = facts.unknownOrderCapFull ? { ...facts, noWait: true } : facts;
    return waitOrReview(finding, facts.orderGracePeriodMs ?? DEFAULT_GRACE_MS, waiting);
  }
  const ours = { order, target };
  const ownProblem = checkOwnOrder(event, order);
  if (ownProblem) return { verdict: 'review', finding: ownProblem, ours };
  if (order.status === target && order.platformOrderNo === event.orderNo) {
    // Final from another state of the pair (pay-in 3 after 6): compare with our order and the receipt that finalised it.
    const applied: AppliedContent = {
      against: 'order',
      kind: order.kind,
      merchantOrderNo: order.merchantOrderNo,
      merchantNo: found.orderMerchantNo,
      fiatAmount: order.kind === 'payin' ? order.amount : null,
    };
    const differs = differsFromApplied(event, target, applied, facts);
    return differs ? { ...differs, ours } : { verdict: 'duplicate', reason: 'already-final', ours };
  }
  return { verdict: 'confirm', ours };
}

/**
 * A callback for an applied pair or an already-final order is a duplicate only when its content is what was applied,
 * as far as Get order confirmed it (a platform retry, a late copy: no alarm; a Quantity of its own is only noted). Otherwise it is evidence of a forgery or a probe: a review with both
 * values of each differing field. Nothing is paid either way. A console re-verify is left to its own judgement of
 * every event of the review. Returns undefined for a copy.
 */
function differsFromApplied(
  event: CallbackJob,
  target: TargetStatus,
  applied: AppliedContent & { receiptId?: number },
  facts: EventFacts,
): Extract<Verdict, { verdict: 'review' }> | undefined {
  if (facts.reverifying) return undefined;
  const differences = differencesFromApplied(event, applied);
  if (differences.length === 0) return undefined;
  const what =
    applied.against === 'receipt'
      ? `receipt ${applied.receiptId} of this pair`
      : `our order, final (${target}) from its other state`;
  const listed = differences.map((d) => `${d.field} ${d.callback ?? 'none'}, applied ${d.applied ?? 'none'}`);
  return {
    verdict: 'review',
    against: applied.against,
    finding: {
      code: ErrorCodes.VERIFY_DIFFERS_FROM_APPLIED,
      reason: `callback differs from what was applied (${what}): ${listed.join('; ')}`,
      details: {
        orderNo: event.orderNo,
        merchantOrderNo: event.merchantOrderNo,
        state: event.state,
        against: applied.against,
        ...(applied.receiptId !== undefined ? { receiptId: applied.receiptId } : {}),
        differences,
      },
    },
  };
}

/**
 * Step 3 when Get order did not answer with the order. An answer that is not the order ({@link unusableAnswer}: a
 * refusal, an HTTP 3xx/4xx, a code-0 reply without usable data) is not a confirmation and not a transport failure
 * either: wait for the same bound as "not final", then review, never a permanent failure on the first try. Anything
 * else (5xx, timeout, unreachable, a reply that is not the envelope) is left to the retry policy.
 */
function unanswered(event: CallbackJob, ours: Ours, error: unknown, waiting: WaitFacts): Verdict {
  const unusable = unusableAnswer(error);
  if (!unusable)
    return { verdict: 'retry', error, ours, final: !!waiting.noWait || classifyError(error) === 'permanent' };
  const ids = { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state };
  const finding = { ...unusable, details: { ...ids, ...unusable.details } };
  return waitOrReview(finding, confirmMaxWait(waiting), waiting, ours);
}

/**
 * Whether the verdict waits for our order to be registered: the one wait the unknown-order cap bounds. The worker then
 * asks the cap for room, the dry run whether the cap would have room, and each decides again with the answer
 * ({@link WaitFacts.unknownOrderCapFull}).
 */
export function waitsForUnknownOrder(v: Verdict): boolean {
  return v.verdict === 'wait' && v.finding.code === ErrorCodes.VERIFY_ORDER_UNKNOWN;
}

function confirmMaxWait(waiting: WaitFacts): number {
  return waiting.confirmMaxWaitMs ?? DEFAULT_CONFIRM_MAX_WAIT_MS;
}

/** Wait while the event is within `boundMs` of first seen (and may wait); past it, review, saying how long it waited. */
function waitOrReview(finding: Finding, boundMs: number, waiting: WaitFacts, ours?: Ours): Verdict {
  const { waitedMs } = waiting;
  if (!waiting.noWait && waitedMs < boundMs) return { verdict: 'wait', finding, waitedMs, boundMs, ours };
  return { verdict: 'review', finding: { ...finding, details: { ...finding.details, waitedMs } }, ours };
}
