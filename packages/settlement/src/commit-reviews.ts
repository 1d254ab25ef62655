import type { Order } from '@mcb/core/db';
import type { PlatformOrder } from '@mcb/core/platform';
import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import type pg from 'pg';
import { SETTLE_REVIEWS_SQL } from './commit-sql.ts';
import { verifyConfirmation } from './verify.ts';

/** One distinct event of an open review of an applied pair, as the commit's statement returns it. */
export interface ReviewEventRow {
  /** The review's id. */
  id: string;
  /** Index of the applied event (of the commit's inputs) whose pair the review is about. */
  i: number;
  /** review_occurrences.event_hash, null for a review without any stored event. */
  hash: string | null;
  event: Record<string, unknown> | null;
}

/** What the commit applied for a pair: the event, our order, Get order's answer and the receipt. */
export interface AppliedPair {
  event: CallbackJob;
  order: Order;
  confirmed: PlatformOrder;
  receiptId: number;
}

/** Why one stored event of a review is not the event Get order confirmed, or undefined when it is. */
export function unconfirmedBecause(
  stored: Record<string, unknown> | null,
  order: Order,
  confirmed: PlatformOrder,
): string | undefined {
  if (!stored) return 'NO_EVENT';
  const parsed = callbackJobSchema.safeParse(stored);
  if (!parsed.success) return 'JOB_PAYLOAD_INVALID';
  return verifyConfirmation(parsed.data, order, confirmed)?.code;
}

/**
 * The open reviews of pairs this transaction applied. A review whose every distinct event is what Get order
 * confirmed (the same event, once reviewed as not final or its order unknown, now applied) is resolved. A review
 * holding any other event (a forged amount or merchant for the same pair) stays open: it is evidence, closed only by
 * a person; its history says that the pair was applied from another event. Both get an attempt in their history.
 */
export async function settleReviews(
  client: pg.PoolClient,
  rows: readonly ReviewEventRow[],
  appliedAt: (i: number) => AppliedPair,
): Promise<void> {
  const byReview = new Map<string, ReviewEventRow[]>();
  for (const r of rows) byReview.set(r.id, [...(byReview.get(r.id) ?? []), r]);
  const ids: string[] = [];
  const resolve: boolean[] = [];
  const sources: string[] = [];
  const codes: (string | null)[] = [];
  const reasons: string[] = [];
  const details: string[] = [];
  for (const [id, events] of byReview) {
    const applied = appliedAt(events[0]!.i);
    const unconfirmed = events.flatMap((e) => {
      const code = unconfirmedBecause(e.event, applied.order, applied.confirmed);
      return code ? [{ hash: e.hash, code }] : [];
    });
    ids.push(id);
    resolve.push(unconfirmed.length === 0);
    sources.push(applied.event.source);
    codes.push(unconfirmed[0]?.code ?? null);
    reasons.push(
      unconfirmed.length === 0
        ? `applied: Get order confirmed state ${applied.confirmed.state} for this review's event (receipt ${applied.receiptId})`
        : `the pair was applied from an event Get order confirmed (receipt ${applied.receiptId}); ` +
            `${unconfirmed.length} of this review's ${events.length} event(s) are not what it confirms ` +
            `(${[...new Set(unconfirmed.map((u) => u.code))].join(', ')}) and were never applied: left open`,
    );
    details.push(
      JSON.stringify({ receiptId: applied.receiptId, confirmedState: applied.confirmed.state, unconfirmed }),
    );
  }
  await client.query(SETTLE_REVIEWS_SQL, [ids, resolve, sources, codes, reasons, details]);
}
