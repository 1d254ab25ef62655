import type { Settled } from '@mcb/core/batcher';
import type { Order } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { PlatformCodeError, type PlatformOrder } from '@mcb/core/platform';
import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import {
  decideAsking,
  decideConfirmed,
  decideEvent,
  waitedSince,
  waitsForUnknownOrder,
  type EventFacts,
  type LookupResult,
  type Verdict,
} from '@mcb/settlement';
import { MERCHANT_NO, payinEvent, payoutEvent } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';

// The one decision the worker acts on and the replay dry run reports: the spec's handling order as a pure function
// of what was read (receipt, our order), Get order's answer and how long the event has waited. Each verdict below is
// reached by the smallest change to an event that would be applied.

const GRACE = 15 * 60_000;
const CONFIRM_MAX = 2 * 3600_000;

const event = callbackJobSchema.parse(
  payinEvent({ orderNo: 'P-1', merchantOrderNo: 'M-1', fiatAmount: '100.50' }),
) as Extract<CallbackJob, { kind: 'payin' }>;

function ours(o: Partial<Order> = {}): Order {
  return {
    id: 7,
    merchantNo: MERCHANT_NO,
    merchantOrderNo: 'M-1',
    kind: 'payin',
    currency: 'PHP',
    amount: '100.50',
    customerId: null,
    paymentMethod: null,
    payoutParams: null,
    status: 'pending',
    platformOrderNo: null,
    requestHash: 'h',
    createdAt: new Date(0),
    updatedAt: new Date(0),
    finalizedAt: null,
    ...o,
  };
}

const confirmed = (o: Partial<PlatformOrder> = {}): PlatformOrder => ({
  orderNo: 'P-1',
  merchantNo: MERCHANT_NO,
  merchantOrderNo: 'M-1',
  type: 'payin',
  state: 6,
  amount: '100.5',
  currency: 'PHP',
  ...o,
});

const answered = (o: Partial<PlatformOrder> = {}): Settled<PlatformOrder> => ({ ok: true, value: confirmed(o) });
const failed = (error: unknown): Settled<PlatformOrder> => ({ ok: false, error });

const receipt = {
  id: 41,
  outcome: 'credited' as const,
  kind: 'payin' as const,
  merchantNo: MERCHANT_NO,
  merchantOrderNo: 'M-1',
  quantity: '17.3',
  fiatAmount: '100.50',
  jobId: 'payin-P-1-6',
};

/** Facts of an event read a minute after it arrived: our order pending, no receipt, Get order not asked yet. */
function facts(f: Partial<Omit<EventFacts, 'found'>> & { found?: Partial<LookupResult> } = {}): EventFacts {
  return {
    waitedMs: 60_000,
    ...f,
    found: { applied: false, order: ours(), ...f.found },
  };
}

const decide = (f: Parameters<typeof facts>[0] = {}, e: CallbackJob = event): Verdict => decideEvent(e, facts(f));

describe('the decision, in the spec order', () => {
  it('applies a verified event of a pending order, once Get order has answered', () => {
    expect(decide()).toMatchObject({ verdict: 'confirm', ours: { order: { id: 7 }, target: 'credited' } });
    expect(decide({ getOrder: answered() })).toMatchObject({
      verdict: 'apply',
      ours: { order: { id: 7 }, target: 'credited' },
      confirmed: { state: 6, amount: '100.5' },
    });
  });

  it('refuses a state its kind does not define as final, before anything else', () => {
    const v = decide({}, { ...event, state: 2 });
    expect(v).toMatchObject({ verdict: 'invalid', finding: { code: ErrorCodes.JOB_PAYLOAD_INVALID } });
    expect(v.ours).toBeUndefined();
  });

  it('1. a receipt of the pair: a duplicate when the callback is a copy, a review when it differs', () => {
    const found = { applied: true, receipt };
    expect(decide({ found, getOrder: answered() })).toEqual({
      verdict: 'duplicate',
      reason: 'receipt-exists',
      receiptId: 41,
    });
    const forged = decide({ found }, { ...event, fiatAmount: '1000.50' });
    expect(forged).toMatchObject({
      verdict: 'review',
      against: 'receipt',
      finding: { code: ErrorCodes.VERIFY_DIFFERS_FROM_APPLIED, details: { receiptId: 41 } },
    });
    // A console re-verify keeps its own judgement of the review's events: no forgery verdict here.
    expect(decide({ found, reverifying: true }, { ...event, fiatAmount: '1000.50' })).toMatchObject({
      verdict: 'duplicate',
    });
  });

  it('1. a receipt of the pair: another Quantity (Get order does not confirm it) is a duplicate with a note, not a review', () => {
    const found = { applied: true, receipt };
    // The receipt may be the forgery's (applied first, the same money): the genuine retries must not be flagged.
    expect(decide({ found }, { ...event, quantity: '999.00' })).toEqual({
      verdict: 'duplicate',
      reason: 'receipt-exists',
      receiptId: 41,
      note: {
        receiptId: 41,
        appliedJobId: 'payin-P-1-6',
        differences: [{ field: 'quantity', callback: '999.00', applied: '17.3' }],
      },
    });
    // The same Quantity written otherwise is the same decimal: a plain duplicate.
    expect(decide({ found }, { ...event, quantity: '17.30' })).not.toHaveProperty('note');
    // Another amount as well: the amount is what Get order confirmed, so that is still a review.
    expect(decide({ found }, { ...event, quantity: '999.00', fiatAmount: '1000.50' })).toMatchObject({
      verdict: 'review',
      finding: { details: { differences: [{ field: 'fiatAmount', callback: '1000.50', applied: '100.50' }] } },
    });
    expect(decide({ found, reverifying: true }, { ...event, quantity: '999.00' })).not.toHaveProperty('note');
  });

  it("1. a receipt this job's own earlier attempt committed in doubt is its credit, not a duplicate", () => {
    expect(decide({ found: { applied: true, receipt }, receiptIsOurs: true })).toMatchObject({
      verdict: 'applied',
      receipt: { id: 41, outcome: 'credited' },
      ours: { order: { id: 7 } },
    });
  });

  it('2. no order of ours: wait for the grace period, then review; noWait decides now', () => {
    const found = { order: undefined };
    expect(decide({ found })).toMatchObject({
      verdict: 'wait',
      finding: { code: ErrorCodes.VERIFY_ORDER_UNKNOWN },
      boundMs: GRACE,
      waitedMs: 60_000,
    });
    expect(decide({ found, waitedMs: GRACE })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.VERIFY_ORDER_UNKNOWN, details: { waitedMs: GRACE } },
    });
    expect(decide({ found, noWait: true })).toMatchObject({ verdict: 'review' });
    expect(decide({ found, orderGracePeriodMs: 30_000 })).toMatchObject({ verdict: 'review' });
  });

  it('2. no order of ours and the unknown-order cap full: review now; the cap bounds that wait and no other', () => {
    const found = { order: undefined };
    expect(waitsForUnknownOrder(decide({ found }))).toBe(true);
    expect(decide({ found, unknownOrderCapFull: true })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.VERIFY_ORDER_UNKNOWN },
    });
    // Get order's "not final" waits whatever the cap says.
    const notFinal = decide({ getOrder: answered({ state: 1 }), unknownOrderCapFull: true });
    expect(notFinal).toMatchObject({ verdict: 'wait', finding: { code: ErrorCodes.VERIFY_NOT_FINAL } });
    expect(waitsForUnknownOrder(notFinal)).toBe(false);
  });

  it('2. our order of another kind or platform order: review without asking Get order', () => {
    expect(decide({ found: { order: ours({ kind: 'payout' }) } })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.VERIFY_KIND_MISMATCH },
      ours: { order: { id: 7 } },
    });
    expect(decide({ found: { order: ours({ platformOrderNo: 'P-9' }) } })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.VERIFY_ORDER_NO_MISMATCH },
    });
  });

  it('2. our order already final with this outcome: a duplicate for a copy, a review when it differs', () => {
    const order = ours({ status: 'credited', platformOrderNo: 'P-1' });
    const other = { ...event, state: 3 };
    expect(decide({ found: { order, orderMerchantNo: MERCHANT_NO } }, other)).toMatchObject({
      verdict: 'duplicate',
      reason: 'already-final',
      ours: { order: { id: 7 } },
    });
    expect(decide({ found: { order, orderMerchantNo: MERCHANT_NO } }, { ...other, fiatAmount: '9.00' })).toMatchObject({
      verdict: 'review',
      against: 'order',
      finding: { code: ErrorCodes.VERIFY_DIFFERS_FROM_APPLIED },
    });
  });

  it('3. Get order refusing, or answering HTTP 3xx/4xx: wait up to CONFIRM_MAX_WAIT, then review', () => {
    const refused = failed(new PlatformCodeError(1001, 'no such order', '/getOrder'));
    expect(decide({ getOrder: refused })).toMatchObject({
      verdict: 'wait',
      finding: { code: ErrorCodes.PLATFORM_ERROR_CODE, details: { platformCode: 1001 } },
      boundMs: CONFIRM_MAX,
    });
    expect(decide({ getOrder: refused, waitedMs: CONFIRM_MAX })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.PLATFORM_ERROR_CODE },
    });
    const http404 = failed(new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 404', { details: { status: 404 } }));
    expect(decide({ getOrder: http404 })).toMatchObject({
      verdict: 'wait',
      finding: { code: ErrorCodes.PLATFORM_HTTP_ERROR, details: { status: 404 } },
    });
    expect(decide({ getOrder: http404, confirmMaxWaitMs: 1000 })).toMatchObject({ verdict: 'review' });
  });

  it('3. Get order answering code 0 without a usable order (data null, a field missing): waits like a refusal', () => {
    // What the platform client throws for `{"code":0,"data":null}`: permanent, so it must not reach the retry policy.
    const garbled = failed(
      new AppError(ErrorCodes.PLATFORM_BAD_RESPONSE, 'platform data does not match the expected shape', {
        details: { issues: [': expected object, received null'] },
      }),
    );
    expect(decide({ getOrder: garbled })).toMatchObject({
      verdict: 'wait',
      finding: { code: ErrorCodes.PLATFORM_BAD_RESPONSE, details: { orderNo: 'P-1' } },
      boundMs: CONFIRM_MAX,
    });
    expect(decide({ getOrder: garbled, waitedMs: CONFIRM_MAX })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.PLATFORM_BAD_RESPONSE },
    });
    expect(decide({ getOrder: garbled, noWait: true })).toMatchObject({ verdict: 'review' });
    // A reply that is not the envelope at all (a proxy's page) is an outage of the path: the retry policy's.
    const page = new AppError(ErrorCodes.PLATFORM_BAD_RESPONSE, 'not JSON', { transient: true });
    expect(decide({ getOrder: failed(page) })).toMatchObject({ verdict: 'retry', error: page });
  });

  it('3. Get order failing in transport (5xx, timeout): nothing decided, the attempt fails for the retry policy', () => {
    const e503 = new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 503', {
      details: { status: 503 },
      transient: true,
    });
    expect(decide({ getOrder: failed(e503) })).toMatchObject({ verdict: 'retry', error: e503, final: false });
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    // On the job's last attempt (noWait) no attempt follows: the job fails for good, as the retry policy then does.
    expect(decide({ getOrder: failed(reset), noWait: true })).toMatchObject({
      verdict: 'retry',
      error: reset,
      final: true,
    });
    // An error no retry fixes is final on any attempt.
    const aborted = new AppError(ErrorCodes.PLATFORM_ABORTED, 'aborted');
    expect(decide({ getOrder: failed(aborted) })).toMatchObject({ verdict: 'retry', final: true });
  });

  it('4. verification: a mismatch is a review; "not final" waits, then reviews', () => {
    expect(decide({ getOrder: answered({ amount: '10.5' }) })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.VERIFY_AMOUNT_MISMATCH },
      ours: { order: { id: 7 } },
    });
    expect(decide({ getOrder: answered({ state: 1 }) })).toMatchObject({
      verdict: 'wait',
      finding: { code: ErrorCodes.VERIFY_NOT_FINAL },
      boundMs: CONFIRM_MAX,
    });
    expect(decide({ getOrder: answered({ state: 1 }), noWait: true })).toMatchObject({
      verdict: 'review',
      finding: { code: ErrorCodes.VERIFY_NOT_FINAL, details: { waitedMs: 60_000 } },
    });
  });

  it('5. an order moves only from pending: a verified event for an order final otherwise is a conflict review', () => {
    const payout = callbackJobSchema.parse(payoutEvent({ orderNo: 'P-1', merchantOrderNo: 'M-1', state: 5 }));
    const order = ours({ kind: 'payout', status: 'succeeded', platformOrderNo: 'P-1' });
    const v = decideEvent(payout, facts({ found: { order }, getOrder: answered({ type: 'payout', state: 5 }) }));
    expect(v).toMatchObject({
      verdict: 'review',
      finding: {
        code: ErrorCodes.VERIFY_CONFLICTING_FINAL_STATE,
        reason: 'our order is already succeeded (platform order P-1); the event would make it refused',
        details: { currentStatus: 'succeeded', currentPlatformOrderNo: 'P-1', confirmedState: 5 },
      },
    });
  });
});

describe('entering at step 4 (a re-verify holds our order and Get order’s answer)', () => {
  it('verifies, then applies, or reads a final order as the transaction would', () => {
    const waiting = { waitedMs: 0, noWait: true };
    expect(decideConfirmed(event, ours(), answered(), waiting)).toMatchObject({ verdict: 'apply' });
    expect(decideConfirmed(event, ours({ status: 'credited', platformOrderNo: 'P-1' }), answered(), waiting)).toEqual({
      verdict: 'duplicate',
      reason: 'already-final',
      ours: { order: expect.objectContaining({ id: 7 }), target: 'credited' },
    });
    expect(decideConfirmed(event, ours(), answered({ state: 1 }), waiting)).toMatchObject({ verdict: 'review' });
    expect(decideConfirmed({ ...event, state: 9 }, ours(), answered(), waiting)).toMatchObject({ verdict: 'invalid' });
  });
});

describe('asking Get order', () => {
  it('happens only when steps 1–2 leave the event undecided, and its answer is decided in the same order', async () => {
    let asked = 0;
    const ask = async () => (asked++, answered());
    expect(await decideAsking(event, facts({ found: { applied: true, receipt } }), ask)).toMatchObject({
      verdict: 'duplicate',
    });
    expect(await decideAsking(event, facts({ found: { order: undefined } }), ask)).toMatchObject({ verdict: 'wait' });
    expect(asked).toBe(0);
    expect(await decideAsking(event, facts(), ask)).toMatchObject({ verdict: 'apply' });
    expect(asked).toBe(1);
  });
});

describe('how long an event has waited', () => {
  it('counts from when it was first seen, else from its receivedAt, else from now', () => {
    const received = { ...event, receivedAt: new Date(1_000_000).toISOString() };
    expect(waitedSince(received, 1_060_000)).toBe(60_000);
    expect(waitedSince(received, 1_060_000, 1_030_000)).toBe(30_000);
    expect(waitedSince({ ...event, receivedAt: 'not a date' }, 5_000)).toBe(0);
  });
});
