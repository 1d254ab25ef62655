/**
 * What waits for a person, counted for the landing page and the Callbacks page: callbacks failed for good,
 * retrying, waiting, and open reviews; and the codes of the callbacks in a set of statuses (the filter's choices).
 * Each count is one index scan (callback_arrivals_status_idx, callback_arrivals_code_idx); Redis is never read.
 */
import { callbackArrivals, reviews, type Database } from '@mcb/core/db';
import { and, count, desc, eq, inArray, isNotNull, sql } from 'drizzle-orm';
import { FORGERY_CODES } from '../reviews/forgery-codes.ts';
import type { ArrivalStatus } from './queries.ts';

export { FORGERY_CODES } from '../reviews/forgery-codes.ts';

/** The landing page's line: "46 failed · 38 retrying · 2 waiting · 5 open reviews · 3 suspected forgeries". */
export interface WaitingCounts {
  failed: number;
  retrying: number;
  waiting: number;
  openReviews: number;
  /**
   * Callbacks in review with a {@link FORGERY_CODES} code whose review is still open: a forgery dismissed or resolved
   * has been handled and no longer waits for a person.
   */
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
      .where(
        and(
          inArray(callbackArrivals.lastCode, [...FORGERY_CODES]),
          eq(callbackArrivals.status, 'review'),
          // The pair's open review (at most one per (order_no, state): the reviews_open_event_key index).
          sql`exists (select 1 from ${reviews} r where r.order_no = ${callbackArrivals.orderNo}
                       and r.state = ${callbackArrivals.state} and r.status = 'open')`,
        ),
      ),
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
