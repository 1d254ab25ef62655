// Kept free of imports: the CLI's review words read it, and the CLI loads no database client.

/**
 * The review codes of a callback whose content contradicts what the platform (Get order) or our receipt says: a
 * forgery or a probe, not a platform delay. VERIFY_DIFFERS_FROM_APPLIED is the worker's own finding (a pair already
 * applied, arriving again with other content); the others are a callback claiming another amount, currency,
 * merchant, order number, kind or state than Get order confirms. The "Suspected forgeries" preset lists them.
 */
export const FORGERY_CODES = [
  'VERIFY_DIFFERS_FROM_APPLIED',
  'VERIFY_AMOUNT_MISMATCH',
  'VERIFY_CURRENCY_MISMATCH',
  'VERIFY_MERCHANT_MISMATCH',
  'VERIFY_ORDER_NO_MISMATCH',
  'VERIFY_KIND_MISMATCH',
  'VERIFY_STATE_MISMATCH',
] as const;
