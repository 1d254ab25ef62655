import type { PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import { isFinalState } from '@mcb/core/spec';

/** Whether Get order reports a state that finishes an order of its type (pay-in 3/6, payout 4/5). */
export function isFinal(confirmed: PlatformOrder): boolean {
  return isFinalState(confirmed.type, confirmed.state);
}

/**
 * The event a callback would have carried, rebuilt from Get order's answer. The dedup key is Get order's
 * (orderNo, state), the same pair a callback of that state uses. `merchantNo` and `merchantOrderNo` are what we
 * asked about (as ingest checks a callback's merchant), so verification still compares them with Get order's
 * answer. Get order reports no USDT quantity and no pay time, so the receipt records neither (NULL, not a made-up
 * zero; its `source` says 'reconcile').
 */
export function sweepEvent(
  confirmed: PlatformOrder,
  asked: { merchantNo: string; merchantOrderNo: string },
  at: Date,
): CallbackJob {
  const common = {
    orderNo: confirmed.orderNo,
    merchantNo: asked.merchantNo,
    merchantOrderNo: asked.merchantOrderNo,
    state: confirmed.state,
    payTime: null,
    receivedAt: at.toISOString(),
    source: 'reconcile' as const,
  };
  return confirmed.type === 'payin'
    ? { kind: 'payin', ...common, quantity: null, fiatAmount: confirmed.amount }
    : { kind: 'payout', ...common };
}
