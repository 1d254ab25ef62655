/**
 * What waits for a person, counted for the landing page and the Callbacks page: callbacks failed for good,
 * retrying, waiting, and open reviews; and the codes of the callbacks in a set of statuses (the filter's choices).
 * Each count is one index scan (callback_arrivals_status_idx, callback_arrivals_code_idx); Redis is never read, except
 * by {@link queueAgainstLists}, which compares the queue's own counts with these.
 */
import { callbackArrivals, reviews, type Database } from '@mcb/core/db';
import type { Queue } from 'bullmq';
import { and, count, desc, eq, inArray, isNotNull, sql } from 'drizzle-orm';
import { FORGERY_CODES } from '../reviews/forgery-codes.ts';
import type { ArrivalStatus } from './queries.ts';

export { FORGERY_CODES } from '../reviews/forgery-codes.ts';

/** The landing page's line: "46 failed · 38 retrying · 2 waiting · 5 open reviews · 3 suspected forgeries". */
export interface WaitingCounts {
  /** Callbacks an attempt of which runs (first attempts only: a later one keeps its `retrying` row). */
  active: number;
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

/** The counts; `merchantNos`: of these merchants only (a merchant's line, a scoped operator's). @defaultValue all */
export async function waitingCounts(db: Database, merchantNos?: readonly string[]): Promise<WaitingCounts> {
  const ofArrivals = merchantNos ? inArray(callbackArrivals.merchantNo, [...merchantNos]) : undefined;
  const [byStatus, [open], [forged]] = await Promise.all([
    db
      .select({ status: callbackArrivals.status, n: count() })
      .from(callbackArrivals)
      .where(and(ofArrivals, inArray(callbackArrivals.status, ['active', 'failed', 'retrying', 'waiting'])))
      .groupBy(callbackArrivals.status),
    db
      .select({ n: count() })
      .from(reviews)
      .where(and(eq(reviews.status, 'open'), merchantNos ? inArray(reviews.merchantNo, [...merchantNos]) : undefined)),
    db
      .select({ n: count() })
      .from(callbackArrivals)
      .where(
        and(
          ofArrivals,
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
    active: of('active'),
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
  merchantNos?: readonly string[],
): Promise<{ code: string; n: number }[]> {
  const n = sql<number>`count(*)::int`;
  const rows = await db
    .select({ code: callbackArrivals.lastCode, n })
    .from(callbackArrivals)
    .where(
      and(
        isNotNull(callbackArrivals.lastCode),
        merchantNos ? inArray(callbackArrivals.merchantNo, [...merchantNos]) : undefined,
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

/** Unfinished (active, waiting, retrying: not ended) and failed callbacks, as the queue or the lists count them. */
export interface QueueTally {
  unfinished: number;
  failed: number;
}

/**
 * The queue's own counts against the lists' (the rows), when they differ: rows not written yet (a database outage:
 * the workers keep them and write them within seconds of its return), callbacks no worker has taken yet, or rows a
 * lost write left behind. `unreadable` when the queue could not be read: then the lists are all there is to go by.
 */
export type QueueAgainstLists =
  | { agree: true }
  | { agree: false; queue: QueueTally; lists: QueueTally }
  | { agree: false; unreadable: true; lists: QueueTally };

/** The BullMQ states of a job that has not ended: its callback is waiting, retrying or running. */
const UNFINISHED_STATES = ['active', 'wait', 'delayed', 'prioritized', 'waiting-children'] as const;

/** Compare BullMQ's job counts (getJobCounts: a few ZCARD/LLEN) with `counts`, the rows'. */
export async function queueAgainstLists(queue: Queue | undefined, counts: WaitingCounts): Promise<QueueAgainstLists> {
  const lists = { unfinished: counts.active + counts.retrying + counts.waiting, failed: counts.failed };
  const jobs = await queue?.getJobCounts(...UNFINISHED_STATES, 'failed').catch(() => undefined);
  if (!jobs) return { agree: false, unreadable: true, lists };
  const tally = { unfinished: UNFINISHED_STATES.reduce((n, s) => n + (jobs[s] ?? 0), 0), failed: jobs.failed ?? 0 };
  if (tally.unfinished === lists.unfinished && tally.failed === lists.failed) return { agree: true };
  return { agree: false, queue: tally, lists };
}

/**
 * Each merchant's rows against its own queue (several merchants: one merchant's missing rows must not be hidden by
 * another's extra ones), as one answer: they agree when every merchant's do; else the sums of both sides, or
 * `unreadable` when a queue could not be read.
 */
export async function merchantsAgainstLists(
  db: Database,
  merchants: readonly { merchantNo: string; queue: Queue | undefined }[],
): Promise<QueueAgainstLists> {
  const each = await Promise.all(
    merchants.map(async (m) => {
      const counts = await waitingCounts(db, [m.merchantNo]);
      return { counts, against: await queueAgainstLists(m.queue, counts) };
    }),
  );
  if (each.every((e) => e.against.agree)) return { agree: true };
  const sum = (f: (e: (typeof each)[number]) => QueueTally): QueueTally =>
    each.map(f).reduce((a, b) => ({ unfinished: a.unfinished + b.unfinished, failed: a.failed + b.failed }), {
      unfinished: 0,
      failed: 0,
    });
  const listsOf = (c: WaitingCounts): QueueTally => ({
    unfinished: c.active + c.retrying + c.waiting,
    failed: c.failed,
  });
  const lists = sum((e) => listsOf(e.counts));
  if (each.some((e) => 'unreadable' in e.against)) return { agree: false, unreadable: true, lists };
  const queue = sum((e) => ('queue' in e.against ? e.against.queue : listsOf(e.counts)));
  return { agree: false, queue, lists };
}
