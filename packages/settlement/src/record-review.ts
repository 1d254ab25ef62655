import { reviews, type Database } from '@mcb/core/db';
import type { CallbackJob } from '@mcb/core/queue';
import { sql } from 'drizzle-orm';
import type { VerifyFailure } from './verify.ts';

/** The review an event landed in, and whether this occurrence opened it. */
export interface RecordedReview {
  id: number;
  /** True when this call inserted the review; false when it counted another occurrence of an open one. */
  opened: boolean;
}

/**
 * Open a review for an event that failed verification, or count one more occurrence of the open review of the
 * same pair (OrderNo, state); the partial unique index keeps one open review per pair. Nothing is credited.
 * `opened` comes from the same statement (a freshly inserted row has xmax = 0), so two workers racing on the
 * same pair can never both believe they opened it.
 */
export async function recordReview(
  db: Database,
  event: CallbackJob,
  failure: Omit<VerifyFailure, 'retry'>,
): Promise<RecordedReview> {
  const rows = await db
    .insert(reviews)
    .values({
      kind: event.kind,
      orderNo: event.orderNo,
      state: event.state,
      merchantOrderNo: event.merchantOrderNo,
      reasonCode: failure.code,
      reason: failure.reason,
      details: failure.details,
      event: { ...event },
    })
    .onConflictDoUpdate({
      target: [reviews.orderNo, reviews.state],
      targetWhere: sql`status = 'open'`,
      set: {
        reasonCode: sql`excluded.reason_code`,
        reason: sql`excluded.reason`,
        details: sql`excluded.details`,
        event: sql`excluded.event`,
        occurrences: sql`${reviews.occurrences} + 1`,
        updatedAt: sql`now()`,
      },
    })
    .returning({ id: reviews.id, opened: sql<boolean>`(xmax = 0)` });
  return rows[0]!;
}
