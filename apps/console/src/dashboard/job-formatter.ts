/**
 * What bull-board may show of a callback job. An operator needs to find a job and judge it: kind, the platform's
 * OrderNo, the state, our merchant order number (to look the order up in the console API), when it arrived and
 * from where. Amounts (`Quantity`, `FiatCurrency`), PayTime and the merchant number stay off the screen: they are
 * business data the screen does not need (GET /api/callbacks shows what was applied). Unknown fields are dropped,
 * and data that is not a callback job is summarised, never echoed.
 */
export function formatJobData(data: unknown): Record<string, unknown> {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return { unreadable: true };
  const d = data as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' ? v.slice(0, 128) : undefined);
  const shown = {
    kind: text(d.kind),
    orderNo: text(d.orderNo),
    state: typeof d.state === 'number' ? d.state : undefined,
    merchantOrderNo: text(d.merchantOrderNo),
    receivedAt: text(d.receivedAt),
    source: text(d.source),
  };
  const out = Object.fromEntries(Object.entries(shown).filter(([, v]) => v !== undefined));
  const hidden = Object.keys(d)
    .filter((k) => !(k in shown))
    .sort();
  return hidden.length > 0 ? { ...out, hiddenFields: hidden } : out;
}

/** A job's result (ApplyOutcome) without anything beyond its status, outcome, codes and ids. */
export function formatReturnValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const v = value as Record<string, unknown>;
  const keep = ['status', 'outcome', 'reason', 'code', 'reviewId', 'orderId', 'receiptId'];
  return Object.fromEntries(keep.filter((k) => v[k] !== undefined).map((k) => [k, v[k]]));
}

/**
 * A job card's title: the job name and the order numbers an operator searches by (ours first: what a customer
 * quotes), e.g. `payin · MO-1042 · P-88123 (state 6)`.
 */
export function formatJobName(job: unknown): string {
  const j = (typeof job === 'object' && job !== null ? job : {}) as { name?: unknown; data?: unknown };
  const d = (typeof j.data === 'object' && j.data !== null ? j.data : {}) as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' && v ? v.slice(0, 64) : undefined);
  const parts = [text(j.name) ?? 'job', text(d.merchantOrderNo), text(d.orderNo)].filter(Boolean);
  const state = typeof d.state === 'number' ? ` (state ${d.state})` : '';
  return `${parts.join(' · ')}${state}`;
}
