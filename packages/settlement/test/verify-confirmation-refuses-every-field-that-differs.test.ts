import type { Order } from '@mcb/core/db';
import { ErrorCodes, type ErrorCode } from '@mcb/core/errors';
import type { PlatformOrder } from '@mcb/core/platform';
import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import { FINAL_STATES, type CallbackKind } from '@mcb/core/spec';
import { checkOwnOrder, verifyConfirmation } from '@mcb/settlement';
import { MERCHANT_NO, payinEvent, payoutEvent } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';

// The spec's step 4 as a table: an event, our order and Get order's answer that agree verify; each field of the
// three changed alone is refused with its own code, and only "not final" may be retried. Every state the spec does not
// name final, of either kind, is "not final".

/** An event of `kind`, our order and Get order's answer, all agreeing (pay-in confirmed as 6, payout as `state`). */
function agreeing(kind: CallbackKind, state = kind === 'payin' ? 6 : 4) {
  const event: CallbackJob = callbackJobSchema.parse(
    kind === 'payin'
      ? payinEvent({ orderNo: 'PPI-1', merchantOrderNo: 'PI-1', fiatAmount: '100.50' })
      : payoutEvent({ orderNo: 'PPI-1', merchantOrderNo: 'PI-1', state }),
  );
  const own: Order = {
    id: 1,
    merchantNo: MERCHANT_NO,
    merchantOrderNo: 'PI-1',
    kind,
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
  };
  const confirmed: PlatformOrder = {
    orderNo: 'PPI-1',
    merchantNo: MERCHANT_NO,
    merchantOrderNo: 'PI-1',
    type: kind,
    state,
    amount: '100.5',
    currency: 'PHP',
  };
  return { event, own, confirmed };
}

type Case = ReturnType<typeof agreeing>;
type Row = [name: string, change: (c: Case) => void, code: ErrorCode];

/** What differs, and the code it must be refused with, for an event of either kind. */
const EITHER_KIND: Row[] = [
  [
    'Get order reports another platform order number',
    (c) => (c.confirmed.orderNo = 'PPI-2'),
    ErrorCodes.VERIFY_ORDER_NO_MISMATCH,
  ],
  [
    'Get order reports another merchant order number',
    (c) => (c.confirmed.merchantOrderNo = 'PI-2'),
    ErrorCodes.VERIFY_ORDER_NO_MISMATCH,
  ],
  [
    'the event names another platform order number',
    (c) => (c.event.orderNo = 'PPI-9'),
    ErrorCodes.VERIFY_ORDER_NO_MISMATCH,
  ],
  [
    'the event names another merchant order number',
    (c) => (c.event.merchantOrderNo = 'PI-9'),
    ErrorCodes.VERIFY_ORDER_NO_MISMATCH,
  ],
  [
    'Get order reports another merchant',
    (c) => (c.confirmed.merchantNo = 'M999999'),
    ErrorCodes.VERIFY_MERCHANT_MISMATCH,
  ],
  ['the event names another merchant', (c) => (c.event.merchantNo = 'M999999'), ErrorCodes.VERIFY_MERCHANT_MISMATCH],
  [
    'Get order reports the other kind',
    (c) => (c.confirmed.type = c.confirmed.type === 'payin' ? 'payout' : 'payin'),
    ErrorCodes.VERIFY_KIND_MISMATCH,
  ],
  ['Get order reports another currency', (c) => (c.confirmed.currency = 'INR'), ErrorCodes.VERIFY_CURRENCY_MISMATCH],
  ['our order is in another currency', (c) => (c.own.currency = 'USD'), ErrorCodes.VERIFY_CURRENCY_MISMATCH],
  [
    "Get order's amount differs from our order's by a cent",
    (c) => (c.own.amount = '100.49'),
    ErrorCodes.VERIFY_OWN_AMOUNT_MISMATCH,
  ],
];

const PAYIN_ONLY: Row[] = [
  [
    "the callback's amount differs from Get order's",
    (c) => c.event.kind === 'payin' && (c.event.fiatAmount = '1005'),
    ErrorCodes.VERIFY_AMOUNT_MISMATCH,
  ],
  [
    "the callback's amount is off by a cent",
    (c) => c.event.kind === 'payin' && (c.event.fiatAmount = '100.51'),
    ErrorCodes.VERIFY_AMOUNT_MISMATCH,
  ],
  // Callback and Get order agree with each other, but not with what we asked the customer to pay.
  [
    "callback and Get order agree on an amount that is not our order's",
    (c) => {
      if (c.event.kind === 'payin') c.event.fiatAmount = '1005';
      c.confirmed.amount = '1005';
    },
    ErrorCodes.VERIFY_OWN_AMOUNT_MISMATCH,
  ],
];

const PAYOUT_ONLY: Row[] = [
  [
    'Get order reports 5 (refused) for a callback of 4',
    (c) => (c.confirmed.state = 5),
    ErrorCodes.VERIFY_STATE_MISMATCH,
  ],
  [
    "Get order's payout amount is not our order's",
    (c) => (c.confirmed.amount = '1005'),
    ErrorCodes.VERIFY_OWN_AMOUNT_MISMATCH,
  ],
];

/**
 * The spec's final states, written out here rather than read from `@mcb/core/spec`: a test that took them from the
 * code under test would agree with any change to it (say, pay-in 2 counted as final).
 */
const SPEC_FINAL: Record<CallbackKind, readonly number[]> = { payin: [3, 6], payout: [4, 5] };

/** States from -1 to 20 (and two far ones) that the spec does not name final for `kind`. */
function nonFinal(kind: CallbackKind): number[] {
  return [-1, ...Array.from({ length: 21 }, (_, i) => i), 99, 2 ** 31 - 1].filter((s) => !SPEC_FINAL[kind].includes(s));
}

function verify(c: Case) {
  return verifyConfirmation(c.event, c.own, c.confirmed);
}

describe('verifyConfirmation', () => {
  it('agrees with the spec on the final states (3 and 6 for a pay-in, 4 and 5 for a payout)', () => {
    expect(FINAL_STATES).toEqual(SPEC_FINAL);
  });

  it.each([
    ['a pay-in Get order reports released (6)', agreeing('payin')],
    [
      'a pay-in Get order reports success (3)',
      (() => {
        const c = agreeing('payin');
        c.confirmed.state = 3;
        return c;
      })(),
    ],
    ['a payout confirmed as succeeded (4)', agreeing('payout', 4)],
    ['a payout confirmed as refused (5)', agreeing('payout', 5)],
    [
      'amounts written differently (100.50, 100.5, 100.500)',
      (() => {
        const c = agreeing('payin');
        c.own.amount = '100.500';
        return c;
      })(),
    ],
    [
      'currencies in another case',
      (() => {
        const c = agreeing('payout');
        c.confirmed.currency = 'php';
        return c;
      })(),
    ],
  ])('verifies %s', (_name, c) => {
    expect(verify(c)).toBeUndefined();
  });

  describe.each(['payin', 'payout'] as const)('a %s', (kind) => {
    const rows = [...EITHER_KIND, ...(kind === 'payin' ? PAYIN_ONLY : PAYOUT_ONLY)];
    it.each(rows)('is refused when %s', (_name, change, code) => {
      const c = agreeing(kind);
      change(c);
      expect(verify(c)).toMatchObject({
        code,
        retry: false,
        details: { orderNo: c.event.orderNo, merchantOrderNo: c.event.merchantOrderNo },
      });
    });

    it.each(nonFinal(kind))('waits (VERIFY_NOT_FINAL, retry) while Get order reports state %i', (state) => {
      const c = agreeing(kind);
      c.confirmed.state = state;
      expect(verify(c)).toMatchObject({
        code: ErrorCodes.VERIFY_NOT_FINAL,
        retry: true,
        details: { confirmedState: state },
      });
    });
  });

  it('refuses a payout callback of 5 that Get order reports as 4', () => {
    const c = agreeing('payout', 5);
    c.confirmed.state = 4;
    expect(verify(c)).toMatchObject({
      code: ErrorCodes.VERIFY_STATE_MISMATCH,
      retry: false,
      details: { confirmedState: 4, state: 5 },
    });
  });

  it('names what differs in the details, for the review', () => {
    const c = agreeing('payin');
    c.confirmed.merchantNo = 'M999999';
    expect(verify(c)?.details).toMatchObject({ confirmedMerchantNo: 'M999999' });
    const d = agreeing('payout');
    d.confirmed.amount = '7';
    expect(verify(d)?.details).toMatchObject({ confirmedAmount: '7', ownAmount: '100.50' });
  });
});

describe('checkOwnOrder', () => {
  it.each(['payin', 'payout'] as const)(
    'accepts a %s of our own of that kind, with no platform number yet or the same one',
    (kind) => {
      const c = agreeing(kind);
      expect(checkOwnOrder(c.event, c.own)).toBeUndefined();
      c.own.platformOrderNo = 'PPI-1';
      expect(checkOwnOrder(c.event, c.own)).toBeUndefined();
    },
  );

  it.each(['payin', 'payout'] as const)('refuses a %s event for our order of the other kind', (kind) => {
    const c = agreeing(kind);
    c.own.kind = kind === 'payin' ? 'payout' : 'payin';
    expect(checkOwnOrder(c.event, c.own)).toMatchObject({ code: ErrorCodes.VERIFY_KIND_MISMATCH, retry: false });
  });

  it('refuses an event for our order that is already another platform order', () => {
    const c = agreeing('payin');
    c.own.platformOrderNo = 'PPI-7';
    expect(checkOwnOrder(c.event, c.own)).toMatchObject({
      code: ErrorCodes.VERIFY_ORDER_NO_MISMATCH,
      details: { ownPlatformOrderNo: 'PPI-7' },
    });
  });
});
