/**
 * Money as exact decimal strings. Amounts never pass through a JS number: callbacks carry
 * unrounded numbers, and a float would turn "0.1" + "0.2" into a mismatch or, worse, a match.
 */

const DECIMAL_RE = /^-?(0|[1-9]\d*)(\.\d+)?$/;

/** Whether `s` is a plain decimal literal (no exponent, no sign but '-', no leading zeros). */
export function isDecimalString(s: string): boolean {
  return DECIMAL_RE.test(s);
}

/**
 * Canonical form of a decimal string: no trailing fractional zeros, no "-0".
 * Also accepts the exponent forms JSON allows (1e3, 1.5E-2), so numbers from a lossless parser normalise too.
 * @throws RangeError when `s` is not a decimal number.
 */
export function normalizeDecimal(s: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(s.trim());
  if (!m) throw new RangeError(`not a decimal number: ${JSON.stringify(s.slice(0, 40))}`);
  const sign = m[1] ?? '';
  let int = m[2] ?? '0';
  let frac = m[3] ?? '';
  const exp = m[4] === undefined ? 0 : Number(m[4]);
  if (!Number.isSafeInteger(exp) || Math.abs(exp) > 1000) {
    throw new RangeError(`decimal exponent out of range: ${JSON.stringify(s.slice(0, 40))}`);
  }
  if (exp > 0) {
    frac = frac.padEnd(exp, '0');
    int += frac.slice(0, exp);
    frac = frac.slice(exp);
  } else if (exp < 0) {
    int = int.padStart(-exp + 1, '0');
    frac = int.slice(int.length + exp) + frac;
    int = int.slice(0, int.length + exp);
  }
  int = int.replace(/^0+(?=\d)/, '');
  frac = frac.replace(/0+$/, '');
  const body = frac ? `${int}.${frac}` : int;
  return body === '0' ? '0' : sign + body;
}

/** Exact equality of two decimal strings ("100" equals "100.00"). */
export function decimalEquals(a: string, b: string): boolean {
  return normalizeDecimal(a) === normalizeDecimal(b);
}

/** Number of digits after the decimal point once trailing zeros are dropped ("1.50" → 1). */
export function decimalPlaces(s: string): number {
  const n = normalizeDecimal(s);
  const dot = n.indexOf('.');
  return dot === -1 ? 0 : n.length - dot - 1;
}

/** Whether the amount is strictly positive. */
export function isPositiveDecimal(s: string): boolean {
  const n = normalizeDecimal(s);
  return !n.startsWith('-') && n !== '0';
}

/** Split a decimal into sign, digits and scale (digits without the point). */
function scaled(s: string): { digits: bigint; scale: number } {
  const n = normalizeDecimal(s);
  const neg = n.startsWith('-');
  const [int, frac = ''] = (neg ? n.slice(1) : n).split('.');
  const digits = BigInt(`${int}${frac}`);
  return { digits: neg ? -digits : digits, scale: frac.length };
}

/** The exact sum of decimal strings, normalised ("0.1" + "0.2" = "0.3"; none: "0"). Totals of money by currency. */
export function sumDecimals(values: readonly string[]): string {
  const parts = values.map(scaled);
  const scale = Math.max(0, ...parts.map((p) => p.scale));
  const total = parts.reduce((acc, p) => acc + p.digits * 10n ** BigInt(scale - p.scale), 0n);
  const neg = total < 0n;
  const text = (neg ? -total : total).toString().padStart(scale + 1, '0');
  const body = scale === 0 ? text : `${text.slice(0, text.length - scale)}.${text.slice(text.length - scale)}`;
  return normalizeDecimal(`${neg ? '-' : ''}${body}`);
}

/**
 * A decimal as people read money: thousands grouped, at least `minPlaces` places ("36790" → "36,790.00"). Text
 * only, exact: the digits are never rounded.
 */
export function formatDecimal(s: string, minPlaces = 2): string {
  const n = normalizeDecimal(s);
  const neg = n.startsWith('-');
  const [int, frac = ''] = (neg ? n.slice(1) : n).split('.');
  const grouped = int!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${neg ? '-' : ''}${grouped}.${frac.padEnd(minPlaces, '0')}`.replace(/\.$/, '');
}
