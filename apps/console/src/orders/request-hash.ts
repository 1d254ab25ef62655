import { createHash } from 'node:crypto';
import { normalizeDecimal } from '@mcb/core/money';

/** What identifies a registration request; two requests are "the same body" when these are equal. */
export interface RegistrationRequest {
  kind: 'payin' | 'payout';
  merchantOrderNo: string;
  currency: string;
  amount: string;
  customerId?: string | undefined;
  paymentMethod?: number | undefined;
  params?: Record<string, string> | undefined;
}

/**
 * SHA-256 of a canonical form of a registration: fixed field order, the amount normalised ("100.50" = "100.5"),
 * params sorted by key, absent optional fields as null. Stored in orders.request_hash so a retried registration
 * is recognised (200) and a different one under the same number is refused (409).
 */
export function registrationHash(r: RegistrationRequest): string {
  const params = r.params ? Object.entries(r.params).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) : null;
  const canonical = JSON.stringify([
    'v1',
    r.kind,
    r.merchantOrderNo,
    r.currency,
    normalizeDecimal(r.amount),
    r.customerId ?? null,
    r.paymentMethod ?? null,
    params,
  ]);
  return createHash('sha256').update(canonical).digest('hex');
}
