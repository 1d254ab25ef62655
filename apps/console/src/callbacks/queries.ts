/**
 * The callback search: every callback a worker took (callback_arrivals), by order numbers, status, kind, code,
 * amount and time, newest first, with keyset (cursor) pagination. One indexed query; Redis is never scanned. The
 * JSON route, the pages, the CLI (through the route) and the replay planner all use this filter and query.
 */
import { isDecimalString } from '@mcb/core/money';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { MERCHANT_REF_PATTERN } from '@mcb/core/config';
import { callbackArrivals, callbackReceipts, reviews, type Database } from '@mcb/core/db';
import { and, desc, eq, gte, inArray, lte, sql, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import { merchantOrderNoSchema } from '../orders/schemas.ts';
import { iso } from '../web/format.ts';

export const ARRIVAL_STATUSES = ['active', 'waiting', 'retrying', 'failed', 'applied', 'duplicate', 'review'] as const;

const decimal = z.string().max(40).refine(isDecimalString, 'expected a decimal string such as "100.50"');
const errorCode = z.string().regex(/^[A-Z0-9_]{2,64}$/, 'expected an error code such as VERIFY_AMOUNT_MISMATCH');
/** Most codes one filter may name. */
export const MAX_CODES = 20;
const instant = z.iso.datetime({ offset: true }).describe('ISO-8601 instant, e.g. 2026-11-24T10:00:00Z');

/** What selects callbacks: the search's filter and a replay's. Every field narrows; all are optional. */
export const callbackFilterSchema = z.strictObject({
  merchant: z
    .string()
    .regex(MERCHANT_REF_PATTERN, 'expected a merchant ref')
    .optional()
    .describe(
      "The merchant's ref (MERCHANTS_FILE): its callbacks only. A replay needs it once the console serves two " +
        'merchants or more (a job id is unique within one merchant’s queue only)',
    ),
  orderNo: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected a platform OrderNo')
    .optional()
    .describe("The platform's OrderNo"),
  merchantOrderNo: merchantOrderNoSchema.optional(),
  status: z
    .union([z.enum(ARRIVAL_STATUSES), z.array(z.enum(ARRIVAL_STATUSES)).min(1).max(ARRIVAL_STATUSES.length)])
    .optional()
    .describe(
      'Where the callback is: active, waiting, retrying, failed (for good), applied, duplicate, review; ' +
        'several: any of them (repeat the parameter)',
    ),
  kind: z.enum(['payin', 'payout']).optional(),
  code: z
    .union([errorCode, z.array(errorCode).min(1).max(MAX_CODES)])
    .optional()
    .describe("The last attempt's error or review code; several: any of them (repeat the parameter)"),
  amountMin: decimal.optional().describe('Pay-in amount at least (payout callbacks carry no amount)'),
  amountMax: decimal.optional().describe('Pay-in amount at most'),
  from: instant.optional().describe('Received at or after'),
  to: instant.optional().describe('Received before'),
  review: z
    .enum(['open', 'closed'])
    .optional()
    .describe(
      "The review of the callback's pair (order no., state): open (waits for a person), or closed (it has one, " +
        'resolved or dismissed, and none open)',
    ),
});
export type CallbackFilter = z.output<typeof callbackFilterSchema>;
/** A filter with its merchant resolved to the number the rows carry (undefined: every merchant's). */
export type ScopedFilter = CallbackFilter & {
  merchantNo?: string | undefined;
  /** The operator's merchants (a scoped operator's reads): only theirs. @defaultValue every merchant's */
  merchantNos?: readonly string[] | undefined;
};

/** One callback as the search shows it: numbers, amount, where it is, its last attempt; never the record. */
export const callbackRowSchema = z.object({
  jobId: z.string(),
  merchantNo: z.string().describe('The merchant number whose queue the job is on'),
  merchant: z.string().optional().describe("The merchant's ref (only when the console serves two or more)"),
  kind: z.enum(['payin', 'payout']),
  orderNo: z.string(),
  state: z.number().int(),
  merchantOrderNo: z.string(),
  amount: z.string().nullable().describe('Pay-in amount as the callback sent it'),
  receivedAt: z.string(),
  firstSeenAt: z.string().describe('When a worker first took it'),
  updatedAt: z.string(),
  attempts: z.number().int(),
  status: z.enum(ARRIVAL_STATUSES),
  outcome: z.string().nullable(),
  code: z.string().nullable(),
  detail: z.string().nullable(),
  appliedAt: z
    .string()
    .nullable()
    .describe("When its receipt was written (the pair's credit or finalisation), if it was"),
});
export type CallbackRow = z.output<typeof callbackRowSchema>;

export const callbackPageSchema = z.object({
  callbacks: z.array(callbackRowSchema),
  nextCursor: z.string().nullable().describe('Pass as `cursor` for the next (older) page; null on the last page'),
});
export type CallbackPage = z.output<typeof callbackPageSchema>;

export type ArrivalStatus = (typeof ARRIVAL_STATUSES)[number];

/** One value or several, as a list (a filter's `status` and `code` take either). */
export function listOf<T>(v: T | readonly T[] | undefined): T[] {
  return v === undefined ? [] : Array.isArray(v) ? [...(v as readonly T[])] : [v as T];
}

/**
 * True when the filter narrows anything (the API refuses an empty one: it would list everything). The merchant alone
 * does not: it would list a whole merchant's.
 */
export function hasFilter(f: CallbackFilter): boolean {
  return Object.entries(f).some(([k, v]) => k !== 'merchant' && v !== undefined);
}

/** The WHERE of a filter on callback_arrivals. */
export function filterWhere(f: ScopedFilter): SQL | undefined {
  const t = callbackArrivals;
  return and(
    f.merchantNo === undefined ? undefined : eq(t.merchantNo, f.merchantNo),
    f.merchantNos === undefined ? undefined : inArray(t.merchantNo, [...f.merchantNos]),
    f.orderNo ? eq(t.orderNo, f.orderNo) : undefined,
    f.merchantOrderNo ? eq(t.merchantOrderNo, f.merchantOrderNo) : undefined,
    f.status ? inArray(t.status, listOf(f.status)) : undefined,
    f.kind ? eq(t.kind, f.kind) : undefined,
    f.code ? inArray(t.lastCode, listOf(f.code)) : undefined,
    f.amountMin ? gte(t.amount, f.amountMin) : undefined,
    f.amountMax ? lte(t.amount, f.amountMax) : undefined,
    f.from ? gte(t.receivedAt, new Date(f.from)) : undefined,
    f.to ? sql`${t.receivedAt} < ${new Date(f.to)}` : undefined,
    f.review ? reviewOfPair(f.review) : undefined,
  );
}

/** The pair (order no., state) of the arrival has an open review, or has reviews and none open. */
function reviewOfPair(review: 'open' | 'closed'): SQL {
  const t = callbackArrivals;
  const open = sql`exists (select 1 from ${reviews} r where r.order_no = ${t.orderNo} and r.state = ${t.state}
                     and r.merchant_no = ${t.merchantNo} and r.status = 'open')`;
  if (review === 'open') return open;
  return sql`exists (select 1 from ${reviews} r where r.order_no = ${t.orderNo} and r.state = ${t.state}
                     and r.merchant_no = ${t.merchantNo})
             and not ${open}`;
}

// A cursor is the last row's (received_at in µs since the epoch, job id): exact, whatever Postgres stored.
function encodeCursor(us: string, jobId: string): string {
  return Buffer.from(JSON.stringify([us, jobId])).toString('base64url');
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown;
    if (Array.isArray(v) && v.length === 2 && /^\d{1,20}$/.test(String(v[0])) && typeof v[1] === 'string')
      return [String(v[0]), v[1]];
  } catch {
    // falls through to the error below
  }
  throw new AppError(ErrorCodes.REQUEST_INVALID, 'cursor: not a cursor this API returned', {
    details: { errors: [{ field: 'cursor', message: 'invalid cursor' }] },
  });
}

/** One page of callbacks matching `filter`, newest first; `limit` rows at most. */
export async function searchCallbacks(
  db: Database,
  filter: ScopedFilter,
  page: { cursor?: string; limit?: number } = {},
): Promise<CallbackPage> {
  const t = callbackArrivals;
  const limit = Math.min(Math.max(page.limit ?? 50, 1), 200);
  const after = page.cursor ? decodeCursor(page.cursor) : undefined;
  const rows = await db
    .select({
      a: t,
      us: sql<string>`(extract(epoch from ${t.receivedAt}) * 1000000)::bigint::text`,
      appliedAt: callbackReceipts.appliedAt,
    })
    .from(t)
    .leftJoin(
      callbackReceipts,
      and(
        eq(callbackReceipts.orderNo, t.orderNo),
        eq(callbackReceipts.state, t.state),
        eq(callbackReceipts.merchantNo, t.merchantNo),
      ),
    )
    .where(
      and(
        filterWhere(filter),
        after
          ? sql`(${t.receivedAt}, ${t.jobId}) < (timestamptz 'epoch' + ${after[0]}::bigint * interval '1 microsecond', ${after[1]})`
          : undefined,
      ),
    )
    .orderBy(desc(t.receivedAt), desc(t.jobId))
    .limit(limit + 1);
  const more = rows.length > limit;
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  return {
    callbacks: shown.map(({ a, appliedAt }) => ({
      jobId: a.jobId,
      merchantNo: a.merchantNo,
      kind: a.kind,
      orderNo: a.orderNo,
      state: a.state,
      merchantOrderNo: a.merchantOrderNo,
      amount: a.amount,
      receivedAt: a.receivedAt.toISOString(),
      firstSeenAt: a.firstSeenAt.toISOString(),
      updatedAt: a.updatedAt.toISOString(),
      attempts: a.attempts,
      status: a.status,
      outcome: a.outcome,
      code: a.lastCode,
      detail: a.lastDetail,
      appliedAt: iso(appliedAt),
    })),
    nextCursor: more && last ? encodeCursor(last.us, last.a.jobId) : null,
  };
}

/** The platform order numbers of a merchant order's callbacks (the timeline then reads their jobs). */
export async function platformOrderNosOf(
  db: Database,
  merchantOrderNo: string,
  merchantNo?: string,
): Promise<string[]> {
  const rows = await db
    .selectDistinct({ orderNo: callbackArrivals.orderNo })
    .from(callbackArrivals)
    .where(
      and(
        eq(callbackArrivals.merchantOrderNo, merchantOrderNo),
        merchantNo ? eq(callbackArrivals.merchantNo, merchantNo) : undefined,
      ),
    )
    .limit(20);
  return rows.map((r) => r.orderNo);
}

/**
 * The callbacks of a merchant order as the worker recorded them (at most 50): the contract's ids and the
 * variants ingest queued under another id (a copy with other content: a forgery or a probe), which the order's
 * timeline shows as well.
 */
export async function arrivalsOf(
  db: Database,
  merchantOrderNo: string,
  merchantNo?: string,
): Promise<(typeof callbackArrivals.$inferSelect)[]> {
  return db
    .select()
    .from(callbackArrivals)
    .where(
      and(
        eq(callbackArrivals.merchantOrderNo, merchantOrderNo),
        merchantNo ? eq(callbackArrivals.merchantNo, merchantNo) : undefined,
      ),
    )
    .limit(50);
}
