import { isDecimalString, normalizeDecimal } from '@mcb/core/money';

/**
 * Exact product of two decimal strings, in canonical form. Used for pay-in quantities, which the spec says are
 * not rounded; a float would make "1000.10 × 0.011976" inexact.
 */
export function multiplyDecimal(a: string, b: string): string {
  const [ai, as] = toScaled(a);
  const [bi, bs] = toScaled(b);
  const product = ai * bi;
  const scale = as + bs;
  const negative = product < 0n;
  const digits = (negative ? -product : product).toString().padStart(scale + 1, '0');
  const text =
    scale === 0 ? digits : `${digits.slice(0, digits.length - scale)}.${digits.slice(digits.length - scale)}`;
  return normalizeDecimal(negative ? `-${text}` : text);
}

function toScaled(s: string): [bigint, number] {
  const n = normalizeDecimal(s);
  const dot = n.indexOf('.');
  if (dot === -1) return [BigInt(n), 0];
  return [BigInt(n.slice(0, dot) + n.slice(dot + 1)), n.length - dot - 1];
}

/** Whether `s` is a positive decimal with at most `decimals` digits after the point (trailing zeros allowed). */
export function fitsDecimals(s: string, decimals: number): boolean {
  if (!isDecimalString(s)) return false;
  const n = normalizeDecimal(s);
  if (n.startsWith('-') || n === '0') return false;
  const dot = n.indexOf('.');
  return dot === -1 || n.length - dot - 1 <= decimals;
}
