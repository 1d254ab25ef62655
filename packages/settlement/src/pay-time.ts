/**
 * How far the platform's clock may be from ours before a PayTime is no longer believed (ms): 5 minutes either way.
 */
export const PAY_TIME_SKEW_MS = 5 * 60_000;

/** A PayTime, and whether it may be measured from. */
export interface PayTimeJudgement {
  /** The instant PayTime names, or NaN when there is none or it does not parse. */
  paidAt: number;
  /** Null when it is plausible; otherwise why not, for the log line. */
  implausible: string | null;
}

/**
 * Whether a record's PayTime is plausible: a payment happens after our order was created and before its callback
 * reached ingest. Callbacks are unsigned and Get order does not confirm PayTime, so a forged one could otherwise claim
 * a payment days old (firing `PaymentToCreditSlow`) or one in the future. Plausible: from `orderCreatedAt` less
 * {@link PAY_TIME_SKEW_MS} to `receivedAt` plus {@link PAY_TIME_SKEW_MS}, both bounds included. A missing or
 * unparsable bound is not checked.
 */
export function judgePayTime(
  payTime: string | null | undefined,
  bounds: { orderCreatedAt: Date | string | undefined; receivedAt: string | undefined },
): PayTimeJudgement {
  const paidAt = payTime ? Date.parse(payTime) : NaN;
  if (Number.isNaN(paidAt)) return { paidAt, implausible: 'no PayTime' };
  const created = bounds.orderCreatedAt === undefined ? NaN : new Date(bounds.orderCreatedAt).getTime();
  const received = bounds.receivedAt === undefined ? NaN : Date.parse(bounds.receivedAt);
  if (paidAt < created - PAY_TIME_SKEW_MS) return { paidAt, implausible: 'PayTime is before our order was created' };
  if (paidAt > received + PAY_TIME_SKEW_MS) return { paidAt, implausible: 'PayTime is after the callback arrived' };
  return { paidAt, implausible: null };
}
