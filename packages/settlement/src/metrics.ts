import type { Counter, Histogram } from '@mcb/core/metrics';

/** The metrics the money path records; the worker registers them (`mcb_worker_*`), other callers may omit them. */
export interface SettlementMetrics {
  /** Reviews opened (or re-seen), by kind and reason code. */
  reviews: Counter<'kind' | 'code'>;
  /**
   * Callbacks for an applied pair (against="receipt") or an already-final order (against="order") whose content
   * differs from what was applied: suspected forgeries, each also a VERIFY_DIFFERS_FROM_APPLIED review.
   */
  suspectedForgeries?: Counter<'kind' | 'against'>;
  /** Get order round trips, by result (ok or the error code). */
  getOrderDuration: Histogram<'result'>;
  /**
   * From the record's PayTime (the platform's UTC+8 local time, stored as an instant) to the commit of the credit
   * (or payout's finalisation) this process made, by kind: how long a customer waited. Events without a PayTime (the
   * sweep's, rebuilt from Get order) or with an implausible one (before our order was created or after the callback
   * arrived, beyond 5 minutes of clock skew: judgePayTime) are not observed.
   */
  paymentToCredit?: Histogram<'kind'>;
  /**
   * From the callback's arrival at ingest (`receivedAt`) to the commit of its credit (or payout's finalisation) this
   * process made, by kind: our own share of the customer's wait. Only callbacks' events (not the sweep's).
   */
  callbackToCredit?: Histogram<'kind'>;
}
