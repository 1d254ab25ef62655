import type { Counter, Histogram } from '@mcb/core/metrics';

/** The metrics the money path records; the worker registers them (`mcb_worker_*`), other callers may omit them. */
export interface SettlementMetrics {
  /** Reviews opened (or re-seen), by kind and reason code. */
  reviews: Counter<'kind' | 'code'>;
  /** Get order round trips, by result (ok or the error code). */
  getOrderDuration: Histogram<'result'>;
}
