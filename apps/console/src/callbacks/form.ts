/**
 * The callback filter as pages carry it: a GET query or a posted form, where `status` and `code` may be repeated
 * (checkboxes, links) or typed comma-separated, and times may be typed without a zone (read as UTC). One parser for
 * the Callbacks page, the replay wizard and their forms, so a filter survives every hop between them unchanged.
 */
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { z } from 'zod';
import { callbackFilterSchema, listOf, type CallbackFilter } from './queries.ts';

/** The filter's fields, in the order links carry them. */
export const FILTER_FIELDS = [
  'status',
  'code',
  'kind',
  'merchantOrderNo',
  'orderNo',
  'amountMin',
  'amountMax',
  'from',
  'to',
  'review',
  'merchant',
] as const;
const LISTS = new Set<string>(['status', 'code']);

/** `2026-11-24 08:00`, `2026-11-24T08:00:15`: a time typed without a zone, read as UTC. */
const LOCAL_TIME = /^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d)(:\d\d)?$/;

/**
 * A time as typed in a filter: `2026-11-24 08:00` or `2026-11-24T08:00:15` (no zone: UTC) as the ISO instant it
 * means; anything else as it is (the schema then says whether it is an instant). The Callbacks page, the replay
 * wizard and the audit's filter all read times through it.
 */
export function asInstant(typed: string): string {
  const local = LOCAL_TIME.exec(typed.trim());
  return local ? `${local[1]}T${local[2]}${local[3] ?? ':00'}Z` : typed.trim();
}

function textsOf(v: unknown): string[] {
  const all = Array.isArray(v) ? v : [v];
  return all.filter((x): x is string => typeof x === 'string');
}

/** The raw values of a query or form, blanks dropped, lists split (before validation). */
function rawFilter(form: Record<string, unknown>): Record<string, string | string[]> {
  const raw: Record<string, string | string[]> = {};
  for (const k of FILTER_FIELDS) {
    if (LISTS.has(k)) {
      const list = [
        ...new Set(
          textsOf(form[k])
            .flatMap((t) => t.split(/[\s,]+/))
            .map((t) => (k === 'code' ? t.toUpperCase() : t.toLowerCase()))
            .filter(Boolean),
        ),
      ];
      if (list.length > 0) raw[k] = list.length === 1 ? list[0]! : list;
      continue;
    }
    const v = (textsOf(form[k])[0] ?? '').trim();
    if (!v) continue;
    raw[k] = k === 'from' || k === 'to' ? asInstant(v) : v;
  }
  return raw;
}

/** The filter of a page's query or form; 400 REQUEST_INVALID saying which field is wrong. */
export function filterOfForm(form: Record<string, unknown>): CallbackFilter {
  const parsed = callbackFilterSchema.safeParse(rawFilter(form));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'filter'}: ${i.message}`).join('; ');
    throw new AppError(ErrorCodes.REQUEST_INVALID, `the filter is not valid: ${problems}`, {
      details: {
        errors: parsed.error.issues.map((i) => ({ field: i.path.join('.') || 'filter', message: i.message })),
      },
    });
  }
  return parsed.data;
}

/**
 * A posted form that carries the filter among its own fields (run now, start a replay), as one zod schema: the
 * form's `shape`, and `filter` read from the filter's fields as {@link filterOfForm} reads them.
 */
export function formWithFilter<S extends z.ZodRawShape>(shape: S) {
  return z.preprocess(
    (form) => ({ ...(form as Record<string, unknown>), filter: rawFilter((form ?? {}) as Record<string, unknown>) }),
    z.object({ ...shape, filter: callbackFilterSchema }),
  );
}

/** What the form's fields show again: the values as typed (lists joined), whether or not they were valid. */
export function formValues(form: Record<string, unknown>): Partial<Record<(typeof FILTER_FIELDS)[number], string>> {
  const out: Partial<Record<(typeof FILTER_FIELDS)[number], string>> = {};
  for (const k of FILTER_FIELDS) {
    const v = textsOf(form[k])
      .map((t) => t.trim())
      .filter(Boolean)
      .join(LISTS.has(k) ? ', ' : '');
    if (v) out[k] = v;
  }
  return out;
}

/** The filter as query parameters (lists repeated), for links between the pages. */
export function filterParams(filter: CallbackFilter, extra: Record<string, string> = {}): URLSearchParams {
  const q = new URLSearchParams();
  for (const k of FILTER_FIELDS) for (const v of listOf(filter[k] as string | string[] | undefined)) q.append(k, v);
  for (const [k, v] of Object.entries(extra)) q.set(k, v);
  return q;
}
