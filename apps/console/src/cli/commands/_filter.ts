/**
 * Not a command: the callback filter as command-line options, shared by `callbacks search` and `replay`. The names
 * are the API's, in kebab case; the API validates the values (a bad one is its 400, said in one line).
 */
export const FILTER_OPTIONS = {
  'merchant-order-no': { type: 'string' },
  'order-no': { type: 'string' },
  status: { type: 'string' },
  kind: { type: 'string' },
  code: { type: 'string' },
  'amount-min': { type: 'string' },
  'amount-max': { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
} as const;

export const FILTER_USAGE = `filter (all narrow together):
  --merchant-order-no NO   our order number (what the customer quotes)
  --order-no NO            the platform's OrderNo
  --status S               active, waiting, retrying, failed, applied, duplicate, review
  --kind payin|payout      --code CODE (e.g. PLATFORM_HTTP_ERROR, VERIFY_AMOUNT_MISMATCH)
  --amount-min D --amount-max D   pay-in amount range (decimal text)
  --from ISO --to ISO      received at or after / before (e.g. 2026-11-24T08:00:00Z)`;

const NAMES: Record<keyof typeof FILTER_OPTIONS, string> = {
  'merchant-order-no': 'merchantOrderNo',
  'order-no': 'orderNo',
  status: 'status',
  kind: 'kind',
  code: 'code',
  'amount-min': 'amountMin',
  'amount-max': 'amountMax',
  from: 'from',
  to: 'to',
};

/** The API's filter object from parsed options (unset options are left out). */
export function filterOf(values: Partial<Record<keyof typeof FILTER_OPTIONS, string | boolean | undefined>>): Record<string, string> {
  const filter: Record<string, string> = {};
  for (const [option, name] of Object.entries(NAMES)) {
    const v = values[option as keyof typeof FILTER_OPTIONS];
    if (typeof v === 'string') filter[name] = v;
  }
  return filter;
}
