import type { Database, ReviewAttempt } from '@mcb/core/db';
import type { CallbackJob } from '@mcb/core/queue';
import { poolOf } from './sql.ts';
import type { VerifyFailure } from './verify.ts';

/** The review an event landed in, and whether this occurrence opened it. */
export interface RecordedReview {
  id: number;
  /** True when this call inserted the review; false when it counted another occurrence of an open one. */
  opened: boolean;
}

// The review keeps the finding of the event that opened it; each distinct event is a row of review_occurrences
// (an identical copy counts on its row), so a forged event and the genuine one of a pair are both kept.
const RECORD_REVIEW_SQL = `
WITH r AS (
  INSERT INTO reviews (kind, order_no, state, merchant_order_no, reason_code, reason, details, event, merchant_no)
  VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9)
  ON CONFLICT (merchant_no, order_no, state) WHERE status = 'open'
  DO UPDATE SET occurrences = reviews.occurrences + 1, updated_at = now()
  RETURNING id, (xmax = 0) AS opened
),
o AS (
  INSERT INTO review_occurrences (review_id, event_hash, event, reason_code, reason, details)
  SELECT r.id, review_event_hash($8::jsonb), $8::jsonb, $5, $6, $7::jsonb FROM r
  ON CONFLICT (review_id, event_hash) DO UPDATE SET seen = review_occurrences.seen + 1, last_seen_at = now()
  RETURNING id
)
SELECT r.id, r.opened FROM r`;

/**
 * Open a review for an event that failed verification, in the name of the event's merchant, or count one more
 * occurrence of that merchant's open review of the same pair (OrderNo, state); the partial unique index keeps one
 * open review per merchant and pair. Nothing is credited.
 * `opened` comes from the same statement (a freshly inserted row has xmax = 0), so two workers racing on the
 * same pair can never both believe they opened it. The review's reason stays that of the event that opened it;
 * the event is kept among the review's occurrences with its own finding.
 */
export async function recordReview(
  db: Database,
  event: CallbackJob,
  failure: Omit<VerifyFailure, 'retry'>,
): Promise<RecordedReview> {
  const params = [
    event.kind,
    event.orderNo,
    event.state,
    event.merchantOrderNo,
    failure.code,
    failure.reason,
    JSON.stringify(failure.details),
    JSON.stringify(event),
    event.merchantNo,
  ];
  for (let attempt = 1; ; attempt++) {
    try {
      const { rows } = await poolOf(db).query<{ id: string; opened: boolean }>(RECORD_REVIEW_SQL, params);
      const row = rows[0]!;
      return { id: Number(row.id), opened: row.opened };
    } catch (e) {
      // During a rollout the previous release's single-merchant index is still there. Two occurrences racing insert
      // into it before the per-merchant one (the ON CONFLICT arbiter) and the second fails as a unique violation
      // instead of counting on the first; run again, it finds the committed review and counts.
      if (attempt >= 2 || (e as { constraint?: string }).constraint !== 'reviews_open_event_key') throw e;
    }
  }
}

/** One entry of a review's history (see review_attempts). */
export interface ReviewAttemptInput {
  source: ReviewAttempt['source'];
  outcome: ReviewAttempt['outcome'];
  reasonCode?: string | null;
  reason: string;
  details?: Record<string, unknown>;
}

/**
 * Add an attempt to a review's history, and close it as resolved when `resolve` says so (only while it is open).
 * The review's own reason and events are left as they are. Returns whether the review was closed by this call.
 */
export async function recordReviewAttempt(
  db: Database,
  reviewId: number,
  attempt: ReviewAttemptInput,
  resolve?: { note: string },
): Promise<boolean> {
  const { rows } = await poolOf(db).query<{ closed: boolean }>(
    `WITH a AS (
       INSERT INTO review_attempts (review_id, source, outcome, reason_code, reason, details)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb)
     ),
     c AS (
       UPDATE reviews SET status = 'resolved', closed_at = now(), updated_at = now(), note = coalesce(note, $7)
        WHERE id = $1 AND status = 'open' AND $7::text IS NOT NULL
       RETURNING id
     )
     SELECT EXISTS (SELECT 1 FROM c) AS closed`,
    [
      reviewId,
      attempt.source,
      attempt.outcome,
      attempt.reasonCode ?? null,
      attempt.reason,
      JSON.stringify(attempt.details ?? {}),
      resolve?.note ?? null,
    ],
  );
  return rows[0]!.closed;
}
