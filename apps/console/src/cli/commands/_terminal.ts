/**
 * Not a command: text from the console's API as a terminal may print it. A stored value (a reason, a refused
 * request's target, a review's note) is someone else's input: printed raw, an escape sequence could recolour or
 * erase lines, a CR could overwrite one, a bidi override could reorder it, and a line break could draw a row that is
 * not in the data (STYLE 32). Every cell the CLI prints goes through {@link terminalText} or {@link terminalLines}.
 */

/**
 * What is never printed as is: C0 controls (NUL, ESC, CR, tab, ...), DEL and C1 controls (CSI among them), the
 * Arabic letter mark, LRM/RLM, and the bidi embeddings, overrides and isolates.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\u0000-\u001F\u007F-\u009F\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/gu;

/** Line breaks a value may hold: its lines are printed as lines (CR alone is not one: it overwrites). */
const LINE_BREAK = /\r\n|\n|\u2028|\u2029/u;

/** A character as visible text: `\r`, `\t`, `\0`, else `\x1b` / `\u202e`. */
function visible(ch: string): string {
  if (ch === '\r') return '\\r';
  if (ch === '\t') return '\\t';
  if (ch === '\n') return '\\n';
  if (ch === '\0') return '\\0';
  const code = ch.codePointAt(0)!;
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** One line of text: every unsafe character (line breaks too) written out as an escape. */
export function terminalText(value: unknown): string {
  return String(value ?? '').replace(UNSAFE, visible);
}

/** A value that may span lines: its lines, each escaped ({@link terminalText}). */
export function terminalLines(value: unknown): string[] {
  return String(value ?? '')
    .split(LINE_BREAK)
    .map(terminalText);
}

/** A multi-line value after `first` (a label or a prefix): continuation lines indented by `indent`. */
export function indentedValue(first: string, value: unknown, indent: string): string {
  const [head = '', ...rest] = terminalLines(value);
  return [`${first}${head}`, ...rest.map((l) => `${indent}${l}`)].join('\n');
}

/** Bidi controls and line separators, which JSON.stringify leaves as they are (it escapes the C0 controls). */
const JSON_UNSAFE = /[\u007F-\u009F\u061C\u200E\u200F\u2028\u2029\u202A-\u202E\u2066-\u2069]/gu;

/**
 * `value` as JSON (indented by `indent` spaces; 0: one line) with no control or bidi character in it: they are
 * written as `\uXXXX`, the same JSON value.
 */
export function terminalJson(value: unknown, indent = 2): string {
  return JSON.stringify(value, null, indent || undefined).replace(
    JSON_UNSAFE,
    (ch) => `\\u${ch.codePointAt(0)!.toString(16).padStart(4, '0')}`,
  );
}

/**
 * Left-aligned columns separated by two spaces, every cell escaped. A cell of the last column that spans lines is
 * printed as indented continuation lines under it; in any other column its line breaks are escaped (`\n`).
 */
export function table(rows: string[][]): string[] {
  const cells = rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? terminalLines(cell) : [terminalText(cell)])));
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((r) => (i < r.length - 1 ? r[i]![0]!.length : 0))));
  return cells.flatMap((r) => {
    const lead = r
      .slice(0, -1)
      .map((c, i) => c[0]!.padEnd(widths[i]!))
      .join('  ');
    const [first = '', ...more] = r[r.length - 1]!;
    const start = r.length > 1 ? `${lead}  ` : '';
    const indent = ' '.repeat(start.length + 2);
    return [`${start}${first}`.trimEnd(), ...more.map((l) => `${indent}${l}`.trimEnd())];
  });
}
