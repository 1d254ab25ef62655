/**
 * Not a command: the callback filter as command-line options, shared by `callbacks search` and `replay`. The names
 * are the API's, in kebab case; the API validates the values (a bad one is its 400, said in one line).
 */
export const FILTER_OPTIONS = {
  merchant: { type: 'string' },
  'merchant-order-no': { type: 'string' },
  'order-no': { type: 'string' },
  status: { type: 'string' },
  kind: { type: 'string' },
  code: { type: 'string' },
  'amount-min': { type: 'string' },
  'amount-max': { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  review: { type: 'string' },
} as const;

export const FILTER_USAGE = `filter (all narrow together):
  --merchant REF           the merchant's ref (MERCHANTS_FILE); a replay needs it with two merchants or more
  --merchant-order-no NO   our order number (what the customer quotes)
  --order-no NO            the platform's OrderNo
  --status S[,S]           active, waiting, retrying, failed, applied, duplicate, review (several: any of them)
  --kind payin|payout      --code CODE[,CODE] (e.g. PLATFORM_CIRCUIT_OPEN,PLATFORM_HTTP_ERROR: any of them)
  --amount-min D --amount-max D   pay-in amount range (decimal text)
  --from ISO --to ISO      received at or after / before (e.g. 2026-11-24T08:00:00Z)
  --review open|closed     the pair's review: open, or closed (resolved or dismissed, none open)`;

const NAMES: Record<keyof typeof FILTER_OPTIONS, string> = {
  merchant: 'merchant',
  'merchant-order-no': 'merchantOrderNo',
  'order-no': 'orderNo',
  status: 'status',
  kind: 'kind',
  code: 'code',
  'amount-min': 'amountMin',
  'amount-max': 'amountMax',
  from: 'from',
  to: 'to',
  review: 'review',
};

/** Options that take several values, comma-separated. */
const LISTS = new Set(['status', 'code']);

/** The API's filter object from parsed options (unset options are left out; `--code A,B` is a list). */
export function filterOf(
  values: Partial<Record<keyof typeof FILTER_OPTIONS, string | boolean | undefined>>,
): Record<string, string | string[]> {
  const filter: Record<string, string | string[]> = {};
  for (const [option, name] of Object.entries(NAMES)) {
    const v = values[option as keyof typeof FILTER_OPTIONS];
    if (typeof v !== 'string') continue;
    const list = LISTS.has(name)
      ? v
          .split(',')
          .map((x) => x.trim())
          .filter(Boolean)
      : [];
    filter[name] = list.length > 1 ? list : v.trim();
  }
  return filter;
}

/** The filter as a query string (a list as the parameter repeated). */
export function filterQuery(
  filter: Record<string, string | string[]>,
  extra: Record<string, string> = {},
): URLSearchParams {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filter)) for (const one of Array.isArray(v) ? v : [v]) q.append(k, one);
  for (const [k, v] of Object.entries(extra)) q.set(k, v);
  return q;
}
