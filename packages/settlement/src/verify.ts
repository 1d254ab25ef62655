import type { Order } from '@mcb/core/db';
import { ErrorCodes, type ErrorCode } from '@mcb/core/errors';
import { decimalEquals } from '@mcb/core/money';
import type { PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import { isFinalState, targetStatusOf, type TargetStatus } from '@mcb/core/spec';

/** Why an event may not be applied. `retry` marks the one outcome that may change with time (not final yet). */
export interface VerifyFailure {
  code: ErrorCode;
  reason: string;
  details: Record<string, unknown>;
  retry: boolean;
}

export type { TargetStatus };

/** The status an event leads to, or undefined when its state is not one the spec defines for its kind. */
export function targetStatus(event: CallbackJob): TargetStatus | undefined {
  return targetStatusOf(event.kind, event.state);
}

function fail(code: ErrorCode, reason: string, details: Record<string, unknown>, retry = false): VerifyFailure {
  return { code, reason, details, retry };
}

/**
 * The spec's step 4 ("Verify with Get order, and trust its result") plus our own order's checks, as a pure
 * function: undefined when the event may be applied, otherwise the first reason it may not. Amounts are compared
 * as exact decimals.
 */
export function verifyConfirmation(
  event: CallbackJob,
  own: Order,
  confirmed: PlatformOrder,
): VerifyFailure | undefined {
  const ids = { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state };
  if (confirmed.merchantOrderNo !== event.merchantOrderNo || confirmed.orderNo !== event.orderNo) {
    return fail(
      ErrorCodes.VERIFY_ORDER_NO_MISMATCH,
      `Get order reports order ${confirmed.orderNo} for ${confirmed.merchantOrderNo}`,
      {
        ...ids,
        confirmedOrderNo: confirmed.orderNo,
        confirmedMerchantOrderNo: confirmed.merchantOrderNo,
      },
    );
  }
  if (confirmed.merchantNo !== event.merchantNo) {
    return fail(ErrorCodes.VERIFY_MERCHANT_MISMATCH, `Get order reports merchant ${confirmed.merchantNo}`, {
      ...ids,
      confirmedMerchantNo: confirmed.merchantNo,
    });
  }
  if (confirmed.type !== event.kind) {
    return fail(
      ErrorCodes.VERIFY_KIND_MISMATCH,
      `Get order reports a ${confirmed.type}, the event is a ${event.kind}`,
      {
        ...ids,
        confirmedType: confirmed.type,
      },
    );
  }
  if (!isFinalState(event.kind, confirmed.state)) {
    return fail(
      ErrorCodes.VERIFY_NOT_FINAL,
      `Get order reports state ${confirmed.state}, not final`,
      { ...ids, confirmedState: confirmed.state },
      true,
    );
  }
  if (event.kind === 'payout' && confirmed.state !== event.state) {
    return fail(
      ErrorCodes.VERIFY_STATE_MISMATCH,
      `Get order reports state ${confirmed.state}, the callback ${event.state}`,
      {
        ...ids,
        confirmedState: confirmed.state,
      },
    );
  }
  if (confirmed.currency.toUpperCase() !== own.currency.toUpperCase()) {
    return fail(
      ErrorCodes.VERIFY_CURRENCY_MISMATCH,
      `Get order reports ${confirmed.currency}, our order is in ${own.currency}`,
      {
        ...ids,
        confirmedCurrency: confirmed.currency,
        ownCurrency: own.currency,
      },
    );
  }
  if (event.kind === 'payin' && !decimalEquals(confirmed.amount, event.fiatAmount)) {
    return fail(
      ErrorCodes.VERIFY_AMOUNT_MISMATCH,
      `Get order reports ${confirmed.amount}, the callback ${event.fiatAmount}`,
      {
        ...ids,
        confirmedAmount: confirmed.amount,
        callbackAmount: event.fiatAmount,
      },
    );
  }
  if (!decimalEquals(confirmed.amount, own.amount)) {
    return fail(
      ErrorCodes.VERIFY_OWN_AMOUNT_MISMATCH,
      `confirmed amount ${confirmed.amount} differs from our order's ${own.amount}`,
      {
        ...ids,
        confirmedAmount: confirmed.amount,
        ownAmount: own.amount,
      },
    );
  }
  return undefined;
}

/** Checks of our own order that need no platform call: the event must match its kind and platform order number. */
export function checkOwnOrder(event: CallbackJob, own: Order): VerifyFailure | undefined {
  const ids = { orderNo: event.orderNo, merchantOrderNo: event.merchantOrderNo, state: event.state };
  if (own.kind !== event.kind) {
    return fail(
      ErrorCodes.VERIFY_KIND_MISMATCH,
      `our order ${own.merchantOrderNo} is a ${own.kind}, the event a ${event.kind}`,
      {
        ...ids,
        ownKind: own.kind,
      },
    );
  }
  if (own.platformOrderNo !== null && own.platformOrderNo !== event.orderNo) {
    return fail(
      ErrorCodes.VERIFY_ORDER_NO_MISMATCH,
      `our order is platform order ${own.platformOrderNo}, the event ${event.orderNo}`,
      {
        ...ids,
        ownPlatformOrderNo: own.platformOrderNo,
      },
    );
  }
  return undefined;
}

/** One field in which a callback differs from what was applied for its pair or its order. */
export interface AppliedDifference {
  field: 'kind' | 'merchantNo' | 'merchantOrderNo' | 'fiatAmount' | 'quantity';
  /** The callback's value. */
  callback: string | null;
  /** The value that was applied (the receipt's, or our order's). */
  applied: string | null;
}

/** What was applied, as far as a later callback can be compared with it. */
export interface AppliedContent {
  /** `receipt`: the pair's own receipt; `order`: the order is final from its other (pay-in) state. */
  against: 'receipt' | 'order';
  kind: 'payin' | 'payout';
  merchantOrderNo: string;
  /** Unknown (undefined) when no receipt says it. */
  merchantNo?: string | undefined;
  /** The applied fiat amount (the receipt's FiatCurrency, or our order's amount); null or undefined: not compared. */
  fiatAmount?: string | null | undefined;
  /** The applied USDT quantity; null or undefined (an event rebuilt from Get order has none): not compared. */
  quantity?: string | null | undefined;
}

/**
 * How a callback for an applied pair (or an already-final order) differs from what was applied, in the fields Get
 * order confirmed when it was applied (kind, order numbers, merchant, fiat amount): empty for a copy (a platform retry,
 * a late duplicate), else each differing field with both values. A value that was not recorded is not compared;
 * amounts are compared as exact decimals. Quantity is not among them: see {@link unconfirmedDifferences}.
 */
export function differencesFromApplied(event: CallbackJob, applied: AppliedContent): AppliedDifference[] {
  const out: AppliedDifference[] = [];
  if (event.kind !== applied.kind) out.push({ field: 'kind', callback: event.kind, applied: applied.kind });
  if (event.merchantOrderNo !== applied.merchantOrderNo)
    out.push({ field: 'merchantOrderNo', callback: event.merchantOrderNo, applied: applied.merchantOrderNo });
  if (applied.merchantNo !== undefined && event.merchantNo !== applied.merchantNo)
    out.push({ field: 'merchantNo', callback: event.merchantNo, applied: applied.merchantNo });
  if (event.kind === 'payin' && applied.fiatAmount != null && !decimalEquals(event.fiatAmount, applied.fiatAmount)) {
    out.push({ field: 'fiatAmount', callback: event.fiatAmount, applied: applied.fiatAmount });
  }
  return out;
}

/**
 * How a callback for an applied pair differs from what was applied in a field Get order never confirms (the pay-in's
 * Quantity). Either value may be the made-up one (a forgery with another Quantity, applied first, moves the same
 * money as the genuine callback), so this is no evidence against the later callback: it stays a duplicate, and the
 * difference is a note on the order naming both jobs. A value that was not recorded is not compared.
 */
export function unconfirmedDifferences(event: CallbackJob, applied: AppliedContent): AppliedDifference[] {
  if (event.kind !== 'payin' || applied.quantity == null || event.quantity === null) return [];
  if (decimalEquals(event.quantity, applied.quantity)) return [];
  return [{ field: 'quantity', callback: event.quantity, applied: applied.quantity }];
}
