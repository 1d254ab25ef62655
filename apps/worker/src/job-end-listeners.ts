import { coerceError, firstLineOf } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { attemptsBefore, CALLBACKS_QUEUE, callbackJobSchema, type CallbackJobInput } from '@mcb/core/queue';
import { UnrecoverableError, type Job } from 'bullmq';
import { jobErrorCode, type ApplyOutcome } from '@mcb/settlement';
import type { Alerter } from './alerts.ts';
import type { ArrivalRecorder } from './arrival-recorder.ts';

type CallbackJob = Job<CallbackJobInput, ApplyOutcome>;

/**
 * A failure that leaves the job in the failed set (a permanent error, or its last attempt), not a retry. 'failed'
 * fires for every failed attempt; only this one is worth a person's time.
 */
export function isFinalFailure(job: Job, err: Error): boolean {
  const permanent = err instanceof UnrecoverableError || err.name === 'UnrecoverableError';
  return permanent || job.attemptsMade >= (job.opts.attempts ?? 1);
}

/**
 * A job's last row in the console's search (`failed`), written once the job is in the failed set (replayable), which
 * is why the processor leaves it to this listener.
 */
export function recordFinalFailure(arrivals: ArrivalRecorder) {
  return (job: CallbackJob | undefined, err: Error): void => {
    if (!job || !isFinalFailure(job, err)) return;
    const parsed = callbackJobSchema.safeParse(job.data);
    if (parsed.success)
      arrivals.settled(job, parsed.data, {
        status: 'failed',
        code: jobErrorCode(err),
        detail: firstLineOf(err),
        attempts: attemptsBefore(job) + job.attemptsMade,
      });
  };
}

/** Tell the alerts that a job of `queue` failed for good (its payload's order fields, if it has them). */
export function alertFinalFailure(alerts: Alerter, queue: string = CALLBACKS_QUEUE) {
  return (job: CallbackJob | undefined, err: Error): void => {
    if (!job || !isFinalFailure(job, err)) return;
    const data = (job.data ?? {}) as Partial<Record<'orderNo' | 'merchantOrderNo', unknown> & { state: unknown }>;
    alerts.notify({
      type: 'job.exhausted',
      queue,
      jobId: job.id ?? '',
      jobName: job.name,
      orderNo: typeof data.orderNo === 'string' ? data.orderNo : undefined,
      state: typeof data.state === 'number' ? data.state : undefined,
      merchantOrderNo: typeof data.merchantOrderNo === 'string' ? data.merchantOrderNo : undefined,
      attemptsMade: job.attemptsMade,
      reason: (job.failedReason ?? err.message).slice(0, 500),
    });
  };
}

/**
 * Remove a job once it ends in review, so its contract id (`{kind}-{OrderNo}-{state}`) is free again for the genuine
 * callback of a pair a forgery reached first. The review stays in Postgres.
 */
export function releaseReviewedJobId(logger: Logger) {
  return (job: CallbackJob, result: ApplyOutcome | undefined): void => {
    if (result?.status !== 'review') return;
    job
      .remove()
      .catch((e: unknown) =>
        logger.warn({ jobId: job.id, err: coerceError(e) }, 'could not release the job id of a reviewed job'),
      );
  };
}
