/**
 * The kinds of value a setting takes (ports, booleans, durations, URLs, address ranges), each a zod schema that
 * reads the environment's text and names what it expected. Every area file (redis.ts, ingest.ts, ...) builds its
 * fields from these, so a duration or a blank-means-unset string reads the same in every area.
 */
import { z } from 'zod';
import { parseDuration } from './duration.ts';
import { parseSourceRanges, type SourceRange } from './source-ranges.ts';

/** What an area's fields parse to: the typed values its checks read. */
export type ValuesOf<Fields extends z.ZodRawShape> = z.output<z.ZodObject<Fields>>;

export const port = (fallback: number) => z.coerce.number().int().min(0).max(65_535).default(fallback);
export const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'expected true or false' })
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
export const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      const ms = parseDuration(v);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: 'expected a duration such as 500ms, 30s, 5m, 2h or 7d' });
        return z.NEVER;
      }
      return ms;
    });
/**
 * A duration of at most `maxMs`; with `positive`, also more than 0 (for bounds where 0 would mean "no limit", as it
 * does to Node's http server).
 */
export const boundedDuration = (fallback: string, maxMs: number, options: { positive?: boolean } = {}) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      const ms = parseDuration(v);
      if (ms === undefined || ms > maxMs || (options.positive && ms <= 0)) {
        const range = options.positive ? `more than 0 and at most ${maxMs} ms` : `at most ${maxMs} ms`;
        ctx.addIssue({ code: 'custom', message: `expected a duration such as 500ms or 10s, ${range}` });
        return z.NEVER;
      }
      return ms;
    });
/** A bound that must hold: more than 0 and at most `maxMs`. */
export const bound = (fallback: string, maxMs: number) => boundedDuration(fallback, maxMs, { positive: true });
export const optionalDuration = z
  .string()
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v.trim() === '') return undefined;
    const ms = parseDuration(v);
    if (ms === undefined || ms <= 0) {
      ctx.addIssue({ code: 'custom', message: 'expected a duration such as 500ms, 30s or 5m' });
      return z.NEVER;
    }
    return ms;
  });
export const url = (protocols: readonly string[], what: string) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `expected a ${what} URL (${protocols.join(' or ')})` },
  );
/** A string whose blank value counts as unset (compose and .env files write `NAME=` for "not set"); trimmed. */
export const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
/**
 * IPv4/IPv6 addresses and CIDR ranges, comma-separated (INGEST_ALLOWED_SOURCES, CONSOLE_TRUSTED_PROXIES); blank or
 * empty means unset. A bad entry is named, and a range with host bits set is refused (see source-ranges.ts).
 */
export const sourceRanges = optionalString.transform((v, ctx): readonly SourceRange[] | undefined => {
  if (v === undefined) return undefined;
  const ranges = parseSourceRanges(v);
  if (typeof ranges === 'string') {
    ctx.addIssue({ code: 'custom', message: `expected IP addresses or CIDR blocks, comma-separated: ${ranges}` });
    return z.NEVER;
  }
  return ranges.length > 0 ? ranges : undefined;
});
/** An optional URL of `protocols`, blank meaning unset. */
export const optionalUrl = (protocols: readonly string[], what: string) =>
  optionalString.pipe(url(protocols, what).optional());
