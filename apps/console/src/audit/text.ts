import { AppError, ErrorCodes } from '@mcb/core/errors';

/**
 * What the trail may store of text someone else wrote: a reason or a review's note is refused when it holds what
 * cannot be stored or read as written ({@link requirePlainText}); a value that must be recorded whatever was sent (a
 * refused request's target, an outcome) is cleaned instead ({@link storableLine}). The views escape again when they
 * print (STYLE 32).
 */

/**
 * Characters free text may not hold: control characters other than tab and line breaks (Postgres refuses NUL in
 * text, and the others garble the audit trail and logs), and lone UTF-16 surrogates (not storable as UTF-8).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSTORABLE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]|\p{Cs}/gu;

/**
 * Bidi embeddings, overrides and isolates (LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI): stored as written, they make
 * the audit page show the text's characters in another order than they were written ("Trojan Source").
 */
const REORDERING = /[\u202A-\u202E\u2066-\u2069]/gu;

/** What a one-line value may not hold besides: line breaks, tab, the bidi marks (LRM, RLM, ALM). */
const NOT_ONE_LINE = /[\t\n\r\u2028\u2029\u200E\u200F\u061C]/gu;

/** Longest reason (and review note) kept. */
export const MAX_REASON = 2000;

/**
 * A character someone can read: a letter, digit, punctuation mark or symbol (not a space, mark or format character).
 */
export const VISIBLE = /[\p{L}\p{N}\p{P}\p{S}]/u;

/**
 * 400 REQUEST_INVALID naming `field` when `text` holds control characters (but tab and line breaks), bidi overrides
 * or isolates, or lone surrogates: free text is stored as written or not at all.
 */
export function requirePlainText(field: string, text: string): void {
  UNSTORABLE.lastIndex = 0;
  REORDERING.lastIndex = 0;
  if (!UNSTORABLE.test(text) && !REORDERING.test(text)) return;
  throw new AppError(
    ErrorCodes.REQUEST_INVALID,
    `the ${field} holds control characters or invalid Unicode: write it as plain text`,
    {
      details: {
        errors: [
          {
            field,
            message: 'no control characters (other than tab and line breaks), bidi overrides or lone surrogates',
          },
        ],
      },
    },
  );
}

/** Free text as far as it can be stored: at most `max` characters, each unstorable or reordering one as U+FFFD. */
export function storableText(text: string, max: number): string {
  return text.slice(0, max).replace(UNSTORABLE, '\uFFFD').replace(REORDERING, '\uFFFD');
}

/**
 * A one-line value (a target, an outcome) as it can be stored whatever was sent: {@link storableText}, and line
 * breaks, tab and bidi marks as U+FFFD too. A NUL in a refused request's target must not cost its `denied` row.
 */
export function storableLine(text: string, max: number): string {
  return storableText(text, max).replace(NOT_ONE_LINE, '\uFFFD');
}
