/** The sandbox's in-memory model: merchant accounts, orders, callback deliveries and their attempts, fault switches. */

/** One merchant account the simulated platform holds (a merchant number with its key pair). */
export interface SandboxMerchant {
  /** How the control API and `pnpm sandbox trigger --merchant` name it; `{ref}` in a callback URL becomes it. */
  ref: string;
  /** Its number on the platform: written into its records, asked for by Get order and the catalog. */
  merchantNo: string;
  /** Its RSA public key (PEM, or Base64 DER SPKI as uploaded to a console); its records are encrypted with it. */
  merchantPublicKeyPem: string;
  /** Its console default callback URL for pay-ins. @defaultValue the sandbox's `payinCallbackUrl`, `{ref}` replaced */
  payinCallbackUrl?: string;
  /** Its console default callback URL for payouts. @defaultValue the sandbox's `payoutCallbackUrl`, `{ref}` replaced */
  payoutCallbackUrl?: string;
}

export type OrderType = 'payin' | 'payout';

/** Pending state of a new order. The spec shows only final states; "anything else = not final" (docs/platform-interface.md). */
export const PENDING_STATE = 1;

/** Per-order fault switches; unset fields fall back to the global ones. */
export interface OrderFaults {
  /** Send every attempt this many times at once (duplicate deliveries). @defaultValue 1 */
  duplicate?: number;
  /** Encrypt records into at least this many RSA blocks, even short ones. @defaultValue 1 */
  minBlocks?: number;
  /**
   * Payouts only: after the genuine callback has settled, send a stale event carrying the other final state and
   * an earlier PayTime, i.e. an earlier event arriving after a later one. Get order contradicts it.
   */
  stale?: boolean;
}

/** Global fault switches (control API `PUT /control/faults`). */
export interface GlobalFaults {
  /** See {@link OrderFaults.duplicate}. @defaultValue 1 */
  duplicate: number;
  /** See {@link OrderFaults.minBlocks}. @defaultValue 1 */
  minBlocks: number;
  /**
   * Hold every new callback while on; when switched off (or on `POST /control/release`) the held ones are sent in
   * reverse order of completion, each first attempt finishing before the next starts. @defaultValue false
   */
  outOfOrder: boolean;
  /** Make getOrder and getPaymentMethods answer HTTP 500 (`error`) or never answer (`hang`). @defaultValue 'off' */
  apiDown: 'off' | 'error' | 'hang';
  /** Delay every getOrder/getPaymentMethods answer by this many real ms ("slow replies"). @defaultValue 0 */
  apiDelayMs: number;
  /** Write Get order's `amount` as a JSON number (exact text) instead of a string. @defaultValue false */
  amountAsNumber: boolean;
}

export const DEFAULT_FAULTS: Readonly<GlobalFaults> = Object.freeze({
  duplicate: 1,
  minBlocks: 1,
  outOfOrder: false,
  apiDown: 'off',
  apiDelayMs: 0,
  amountAsNumber: false,
});

/** One order as the platform keeps it. */
export interface SandboxOrder {
  /** The platform's order number (generated). */
  orderNo: string;
  /** The ref of the merchant account it belongs to (`default` when the sandbox simulates one merchant). */
  merchant: string;
  merchantNo: string;
  /** The merchant's own order number, unique per merchant. */
  merchantOrderNo: string;
  type: OrderType;
  /** Fiat amount, exact decimal text as given. */
  amount: string;
  currency: string;
  /** Pay-ins: USDT quantity, exact decimal text; payouts: null. */
  quantity: string | null;
  state: number;
  /** Payouts submitted in the console (`console`) never produce callbacks. */
  createdVia: 'api' | 'console';
  /** The `callbackUrl` passed at creation; null means the console default for the kind, read when sending. */
  callbackUrl: string | null;
  createdAt: string;
  /** When the order reached a final state (pay-in 3 or 6: when the customer paid). */
  finishedAt: string | null;
  history: { state: number; at: string }[];
  faults: OrderFaults;
}

/** One send of a callback and what came back. */
export interface Attempt {
  /** 1 to 5. */
  number: number;
  /** 1 to N when the duplicate switch sends an attempt N times. */
  copy: number;
  at: string;
  /** HTTP status, or null when no reply came (time-out, connection refused). */
  status: number | null;
  /** First 64 characters of the reply body. */
  bodySnippet: string;
  outcome: 'success' | 'failure';
  /** Why it failed: `timeout`, a network error, `status 500`, `body not accepted`; null on success. */
  error: string | null;
  durationMs: number;
}

/** Why a delivery exists: a real state change, a forged record, or a stale earlier event sent late. */
export type DeliveryEvent = 'genuine' | 'forged' | 'stale';

/** One callback event (an order reaching a state, or a fault) and its attempts. */
export interface Delivery {
  id: string;
  /** The ref of the merchant account whose public key encrypts it. */
  merchant: string;
  orderNo: string;
  merchantOrderNo: string;
  type: OrderType;
  event: DeliveryEvent;
  /** The state the record carries (`OrderState` or `state`). */
  state: number;
  url: string;
  /** The decrypted record (the sandbox is a simulator with test keys; a real platform would not expose it). */
  record: string;
  minBlocks: number;
  duplicate: number;
  status: 'held' | 'scheduled' | 'sending' | 'delivered' | 'gave-up' | 'cancelled';
  attempts: Attempt[];
  /** When the next attempt is due (ISO), or null. */
  nextAttemptAt: string | null;
  createdAt: string;
}
