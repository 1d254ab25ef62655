/**
 * What waits for a person, counted for the landing page and the Callbacks page: callbacks failed for good,
 * retrying, waiting, and open reviews; and the codes of the callbacks in a set of statuses (the filter's choices).
 * Each count is one index scan (callback_arrivals_status_idx, callback_arrivals_code_idx); Redis is never read.
 */
import { callbackArrivals, reviews, type Database } from '@mcb/core/db';
import { and, count, desc, eq, inArray, isNotNull, sql } from 'drizzle-orm';
import type { ArrivalStatus } from './queries.ts';

/**
 * The review codes of a callback whose content contradicts what the platform (Get order) or our receipt says: a
 * forgery or a probe, not a platform delay. VERIFY_DIFFERS_FROM_APPLIED is the worker's own finding (a pair already
 * applied, arriving again with other content); the others are a callback claiming another amount, currency,
 * merchant, order number, kind or state than Get order confirms. The "Suspected forgeries" preset lists them.
 */
export const FORGERY_CODES = [
  'VERIFY_DIFFERS_FROM_APPLIED',
  'VERIFY_AMOUNT_MISMATCH',
  'VERIFY_CURRENCY_MISMATCH',
  'VERIFY_MERCHANT_MISMATCH',
  'VERIFY_ORDER_NO_MISMATCH',
  'VERIFY_KIND_MISMATCH',
  'VERIFY_STATE_MISMATCH',
] as const;

/** The landing page's line: "46 failed · 38 retrying · 2 waiting · 5 open reviews · 3 suspected forgeries". */
export interface WaitingCounts {
  failed: number;
  retrying: number;
  waiting: number;
  openReviews: number;
  /** Callbacks in review with a {@link FORGERY_CODES} code. */
  suspectedForgeries: number;
}

export async function waitingCounts(db: Database): Promise<WaitingCounts> {
  const [byStatus, [open], [forged]] = await Promise.all([
    db
      .select({ status: callbackArrivals.status, n: count() })
      .from(callbackArrivals)
      .where(inArray(callbackArrivals.status, ['failed', 'retrying', 'waiting']))
      .groupBy(callbackArrivals.status),
    db.select({ n: count() }).from(reviews).where(eq(reviews.status, 'open')),
    db
      .select({ n: count() })
      .from(callbackArrivals)
      .where(and(inArray(callbackArrivals.lastCode, [...FORGERY_CODES]), eq(callbackArrivals.status, 'review'))),
  ]);
  const of = (s: ArrivalStatus) => byStatus.find((r) => r.status === s)?.n ?? 0;
  return {
    failed: of('failed'),
    retrying: of('retrying'),
    waiting: of('waiting'),
    openReviews: open?.n ?? 0,
    suspectedForgeries: forged?.n ?? 0,
  };
}

/** The codes of callbacks in `statuses`, most frequent first (at most 30): the filter offers these. */
export async function codesOf(
  db: Database,
  statuses: readonly ArrivalStatus[],
): Promise<{ code: string; n: number }[]> {
  const n = sql<number>`count(*)::int`;
  const rows = await db
    .select({ code: callbackArrivals.lastCode, n })
    .from(callbackArrivals)
    .where(
      and(
        isNotNull(callbackArrivals.lastCode),
        statuses.length > 0 ? inArray(callbackArrivals.status, [...statuses]) : undefined,
      ),
    )
    .groupBy(callbackArrivals.lastCode)
    .orderBy(desc(n))
    .limit(30);
  return rows.map((r) => ({ code: r.code!, n: r.n }));
}

/** How many callbacks match (counted up to `cap`; more reads as "more than cap"). */
export async function countMatching(
  db: Database,
  where: ReturnType<typeof and>,
  cap = 10_000,
): Promise<{ n: number; more: boolean }> {
  const inner = db
    .select({ one: sql`1` })
    .from(callbackArrivals)
    .where(where)
    .limit(cap + 1)
    .as('m');
  const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(inner);
  const n = row?.n ?? 0;
  return { n: Math.min(n, cap), more: n > cap };
}
