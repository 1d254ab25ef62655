import { reviewOccurrences, reviews, type Database, type Review } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { PlatformCodeError } from '@mcb/core/platform';
import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import { asc, eq } from 'drizzle-orm';
import { unconfirmedBecause } from './commit-reviews.ts';
import { findOrder } from './lookup.ts';
import { recordReviewAttempt } from './record-review.ts';
import { confirmEvent, decideAndCommit, type ApplyDeps, type ApplyOutcome } from './settle.ts';
import { verifyConfirmation } from './verify.ts';

/** What re-verifying a review came to: `applied` now, `duplicate` (applied before), or `review` (still failing). */
export type ReverifyOutcome = Exclude<ApplyOutcome, { status: 'deferred' }>;

async function openReview(db: Database, reviewId: number): Promise<{ review: Review; events: CallbackJob[] }> {
  const [review] = await db.select().from(reviews).where(eq(reviews.id, reviewId));
  if (!review) throw new AppError(ErrorCodes.NOT_FOUND, `no review ${reviewId}`, { details: { reviewId } });
  if (review.status !== 'open') {
    throw new AppError(ErrorCodes.REVIEW_NOT_OPEN, `review ${reviewId} is already ${review.status}`, {
      details: { reviewId, status: review.status },
    });
  }
  const stored = await db
    .select({ event: reviewOccurrences.event })
    .from(reviewOccurrences)
    .where(eq(reviewOccurrences.reviewId, reviewId))
    .orderBy(asc(reviewOccurrences.id));
  const events = (stored.length > 0 ? stored.map((s) => s.event) : [review.event]).flatMap((e) => {
    const parsed = callbackJobSchema.safeParse({ ...e, source: 'review' });
    return parsed.success ? [parsed.data] : [];
  });
  if (events.length === 0) {
    throw new AppError(
      ErrorCodes.REQUEST_INVALID,
      `review ${reviewId} holds no event that can be re-verified; dismiss it`,
      { details: { reviewId } },
    );
  }
  return { review, events };
}

/**
 * Re-verify an open review now (the console's re-verify): ask Get order, and apply the first of the review's events
 * that it confirms, through the same commit as a callback job (which resolves the review only when every event of
 * it is confirmed, in the crediting transaction). Whatever it comes to is added to the review's history as an
 * attempt; the review's own reason (the original finding) is never rewritten, and a review holding an event Get
 * order does not confirm is never closed as applied.
 *
 * @throws AppError NOT_FOUND, REVIEW_NOT_OPEN, REQUEST_INVALID (no event to re-verify); transient errors (platform
 *   or database unreachable) with nothing recorded.
 */
export async function reverifyReview(deps: ApplyDeps, reviewId: number): Promise<ReverifyOutcome> {
  const { review, events } = await openReview(deps.db, reviewId);
  const options = { noWait: true, reverifyOf: review.id };
  const first = events[0]!;
  const confirmation = await confirmEvent(first, deps, options);
  let outcome: ApplyOutcome;
  if (confirmation.status === 'confirmed') {
    const { order, confirmed } = confirmation;
    const pick = events.find((e) => !verifyConfirmation(e, order, confirmed)) ?? first;
    outcome = await decideAndCommit(pick, order, confirmed, deps, options);
  } else {
    outcome = confirmation;
  }
  if (outcome.status === 'duplicate') return appliedBefore(deps, review, events, outcome);
  if (outcome.status === 'deferred') throw new Error('re-verify: an event was deferred although noWait is set');
  return outcome;
}

/**
 * The pair (or the order's outcome) was applied before. Resolve the review only when Get order confirms every event
 * of it; otherwise it holds an event that was never confirmed (a forgery of the applied pair) and stays open.
 */
async function appliedBefore(
  deps: ApplyDeps,
  review: Review,
  events: CallbackJob[],
  outcome: Extract<ApplyOutcome, { status: 'duplicate' }>,
): Promise<ReverifyOutcome> {
  const first = events[0]!;
  const order = await findOrder(deps.db, { merchantNo: review.merchantNo, merchantOrderNo: first.merchantOrderNo });
  const why =
    outcome.reason === 'receipt-exists' ? 'the pair was applied before' : 'the order already has this outcome';
  let codes: string[];
  try {
    const confirmed = await deps.platform.getOrder(first.merchantOrderNo);
    codes = order
      ? events.flatMap((e) => unconfirmedBecause({ ...e }, order, confirmed) ?? [])
      : [ErrorCodes.VERIFY_ORDER_UNKNOWN];
  } catch (e) {
    if (!(e instanceof PlatformCodeError)) throw e;
    // Get order refuses to answer: nothing confirms this review's events, so it stays open.
    const reason = `${why}, but Get order refused to confirm this review's events (${e.platformCode}): left open`;
    await recordReviewAttempt(deps.db, review.id, {
      source: 'review',
      outcome: 'kept-open',
      reasonCode: ErrorCodes.PLATFORM_ERROR_CODE,
      reason,
      details: { applied: outcome.reason, platformCode: e.platformCode },
    });
    return outcome;
  }
  if (codes.length === 0) {
    await recordReviewAttempt(
      deps.db,
      review.id,
      {
        source: 'review',
        outcome: 'already-applied',
        reason: `${why}; Get order confirms every event of this review`,
        details: { applied: outcome.reason },
      },
      { note: 'already applied' },
    );
  } else {
    const distinct = [...new Set(codes)];
    await recordReviewAttempt(deps.db, review.id, {
      source: 'review',
      outcome: 'kept-open',
      reasonCode: distinct[0] ?? null,
      reason:
        `${why}, but ${codes.length} of this review's ${events.length} event(s) are not what Get order confirms ` +
        `(${distinct.join(', ')}): never applied, left open`,
      details: { applied: outcome.reason, unconfirmed: codes },
    });
  }
  return outcome;
}
