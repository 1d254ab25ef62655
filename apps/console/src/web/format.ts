import { formatDecimal } from '@mcb/core/money';
import { html, type Html } from './html.ts';

/**
 * A time as an ISO-8601 instant, as view models and API bodies carry it: a `Date` (a database column) or epoch
 * milliseconds (a BullMQ job's stamps); null for none (anything else, such as a column a later schema renamed, is
 * none too).
 */
export function iso(at: Date | number): string;
export function iso(at: Date | number | null | undefined): string | null;
export function iso(at: Date | number | null | undefined): string | null {
  if (at instanceof Date) return at.toISOString();
  return typeof at === 'number' ? new Date(at).toISOString() : null;
}

/** An ISO instant as people read it at a glance, in UTC (the logs' zone): `2026-11-24 03:02:11 UTC`. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A status word, coloured by class (`status-credited`, `status-failed`, ...). */
export const status = (word: string): Html =>
  html`<span class="status status-${word.replace(/[^a-z-]/gi, '')}">${word}</span>`;

/** A value of a review's `details` (compared amounts, states, waited time) as one line of text. */
export function detailValue(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  try {
    return JSON.stringify(v).slice(0, 300);
  } catch {
    return '(unreadable)';
  }
}

/**
 * An amount as every page writes it, through the one formatter: thousands grouped, at least two places
 * ("1250.5" → "1,250.50"), text in and text out, never a float. A value that is not a decimal (a forged callback's
 * field) is shown as stored; none is "—". JSON bodies keep the raw decimal string.
 */
export function amountText(v: unknown): string {
  if (v === null || v === undefined) return '—';
  try {
    return formatDecimal(String(v));
  } catch {
    return detailValue(v);
  }
}

/** A local link to an order's page. */
export const orderHref = (merchantOrderNo: string) => `/orders/${encodeURIComponent(merchantOrderNo)}`;
