/**
 * HTML that escapes by default (STYLE 19): every value interpolated into {@link html} is escaped unless it is
 * already {@link Html} (built by this tag, or marked with {@link raw}). Arrays are joined; null, undefined and
 * false render nothing, so `${cond && html`...`}` works. Views are typed functions `(vm: X) => Html`.
 */
export class Html {
  readonly value: string;
  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Text made safe for element content and quoted attribute values. */
export const escapeHtml = (text: string): string => text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);

/**
 * Interpolated value kinds: text and numbers are escaped; Html passes through; nothing renders for
 * null/undefined/false.
 */
export type HtmlValue = Html | string | number | bigint | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new Html(out);
}

/** Mark trusted markup as HTML (our own constants only; never a value that came from a request or the database). */
export const raw = (markup: string): Html => new Html(markup);
