import { coerceError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { CallbackJob } from '@mcb/core/queue';
import { recordReview, type ApplyDeps, type ApplyOutcome } from '@mcb/settlement';

/**
 * A job on one merchant's queue that carries another merchant number (ingest enqueues each callback on the queue of
 * the merchant whose key and number it passed, so only a fault or a write into Redis puts it here). Its lane must not
 * settle it: the lane's Get order asks the platform with the lane's own number, and the lane's money is not that
 * merchant's. So it is treated as a forged callback, defence in depth: nothing is asked of the platform and nothing
 * is credited; a review VERIFY_MERCHANT_MISMATCH keeps the event (in the name of the number it carries, as every
 * review is) with both numbers, its alert goes out, and the job completes as `review`. Failing the job instead would
 * only bring it back to the same wrong queue on a replay.
 */
export async function reviewMisroutedJob(
  deps: Pick<ApplyDeps, 'db' | 'metrics' | 'onReviewOpened'> & { logger: Logger },
  event: CallbackJob,
  laneMerchantNo: string,
  jobId: string | undefined,
): Promise<ApplyOutcome> {
  const code = ErrorCodes.VERIFY_MERCHANT_MISMATCH;
  const reason = `the job carries merchant number ${event.merchantNo} but is on merchant ${laneMerchantNo}'s queue`;
  const review = await recordReview(deps.db, event, {
    code,
    reason,
    details: { jobMerchantNo: event.merchantNo, laneMerchantNo, jobId },
  });
  deps.metrics?.reviews.inc({ kind: event.kind, code });
  deps.logger.warn(
    { jobId, orderNo: event.orderNo, state: event.state, code, reviewId: review.id, laneMerchantNo },
    `job sent to review, not settled: ${reason}`,
  );
  if (review.opened) {
    try {
      deps.onReviewOpened?.({
        reviewId: review.id,
        kind: event.kind,
        orderNo: event.orderNo,
        state: event.state,
        merchantOrderNo: event.merchantOrderNo,
        code,
        reason,
      });
    } catch (e) {
      deps.logger.warn({ reviewId: review.id, err: coerceError(e) }, 'review-opened hook failed; the review is stored');
    }
  }
  return { status: 'review', code, reason, reviewId: review.id, opened: review.opened };
}
