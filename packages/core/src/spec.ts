/**
 * The spec's facts (docs/platform-interface.md), each defined once: kinds, state numbers, which states are
 * final, what each final state does to our order, and which network failures are worth retrying. Worker, ingest,
 * sandbox, bench and tests import them from here.
 */

/** The two kinds of order and callback. */
export const CALLBACK_KINDS = ['payin', 'payout'] as const;
export type CallbackKind = (typeof CALLBACK_KINDS)[number];

/** Pay-in `OrderState` values the spec shows: 3 Success, 6 Released (the pay-in callback always carries 6). */
export const PayinState = { Success: 3, Released: 6 } as const;
/** Payout `state` values the spec shows: 4 Succeeded, 5 Refused (the frozen USDT is refunded). */
export const PayoutState = { Succeeded: 4, Refused: 5 } as const;

/** States that finish an order of each kind (Get order may report either pay-in state). Anything else is not final. */
export const FINAL_STATES: Readonly<Record<CallbackKind, readonly number[]>> = {
  payin: [PayinState.Success, PayinState.Released],
  payout: [PayoutState.Succeeded, PayoutState.Refused],
};

/** States the platform sends a callback for: pay-in 6, payout 4 and 5. */
export const CALLBACK_SENT_STATES: Readonly<Record<CallbackKind, readonly number[]>> = {
  payin: [PayinState.Released],
  payout: [PayoutState.Succeeded, PayoutState.Refused],
};

/** Whether `state` finishes an order of `kind`. */
export function isFinalState(kind: CallbackKind, state: number): boolean {
  return FINAL_STATES[kind].includes(state);
}

/** The status our order moves to when an event of that final state is applied. */
export type TargetStatus = 'credited' | 'succeeded' | 'refused';

/** The status a final state leads to (pay-in 3/6 → credited, payout 4 → succeeded, 5 → refused), else undefined. */
export function targetStatusOf(kind: CallbackKind, state: number): TargetStatus | undefined {
  if (kind === 'payin') return isFinalState('payin', state) ? 'credited' : undefined;
  if (state === PayoutState.Succeeded) return 'succeeded';
  if (state === PayoutState.Refused) return 'refused';
  return undefined;
}

/** Node socket error codes: the peer went away or is not reachable yet; the same request may succeed later. */
export const TRANSIENT_NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

/**
 * The platform's error codes for Query payment methods. The spec lists 40010 and 40017 without their meaning; read
 * with the request's fields (merchantNo, currencyType) they are: the merchant number is not known, and the currency
 * is not enabled for this merchant. Get order's "order not found" is not in the spec; 40404 is our assumption
 * (docs/platform-interface.md), shared with the sandbox.
 */
export const PLATFORM_CODES = {
  ok: 0,
  merchantUnknown: 40010,
  currencyNotEnabled: 40017,
  orderNotFound: 40404,
} as const;
