/**
 * "Replay this job" on the order page (and POST /api/orders/{merchantOrderNo}/jobs/{jobId}/replay): one failed job of
 * the order sent back to the queue with a fresh retry budget, like Retry on a Hookdeck or Svix event. Role operator, a
 * reason; audited as `queue.retry` on `job:callbacks/{jobId}` (the dashboard's retry, the same effect) with
 * `via: order-page`, its intent row written before the job moves (docs/console.md, "Actions that commit on their
 * own"). Safe to repeat: applyEvent's receipt under (OrderNo, state) keeps a replayed job from crediting twice.
 */
import type { Database } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { retryKeepingStory } from '@mcb/core/queue';
import type { Queue } from 'bullmq';
import { authorize, commitExternalAction, type Actor } from '../audit/perform.ts';

export interface ReplayJobDeps {
  db: Database;
  logger: Logger;
  queue: Queue;
}

/** What the replay did: the job is waiting again, with a fresh budget. */
export interface ReplayedJob {
  jobId: string;
  attemptsBefore: number;
}

/**
 * Replay one failed job of `merchantOrderNo` (404 when the job is not the order's, 409 JOB_NOT_FAILED when not
 * failed).
 */
export async function replayJob(
  deps: ReplayJobDeps,
  actor: Actor,
  merchantOrderNo: string,
  jobId: string,
  reason: unknown,
): Promise<ReplayedJob> {
  const auth = await authorize(deps, actor, {
    action: 'queue.retry',
    target: `job:${deps.queue.name}/${jobId}`,
    reason,
  });
  // A job that is not the order's is a wrong request, refused before anything is recorded against that job.
  const job = await deps.queue.getJob(jobId);
  if (!job || (job.data as { merchantOrderNo?: unknown }).merchantOrderNo !== merchantOrderNo) {
    throw new AppError(ErrorCodes.NOT_FOUND, `order ${merchantOrderNo} has no job ${jobId}`, {
      details: { merchantOrderNo, jobId },
    });
  }
  return commitExternalAction(deps, auth, async () => {
    const state = await job.getState();
    if (state !== 'failed')
      throw new AppError(ErrorCodes.JOB_NOT_FAILED, `job ${jobId} is ${state}, not failed: nothing to replay`, {
        details: { jobId, state },
      });
    const attemptsBefore = job.attemptsMade;
    try {
      await retryKeepingStory(job, 'failed');
    } catch (e) {
      // Someone (a replay, the dashboard) sent it back between our look and the retry.
      if (/not in the failed state|is not in the|Missing key/i.test(e instanceof Error ? e.message : '')) {
        throw new AppError(ErrorCodes.JOB_NOT_FAILED, `job ${jobId} is no longer failed: nothing to replay`, {
          details: { jobId },
        });
      }
      throw e;
    }
    return {
      result: { jobId, attemptsBefore },
      outcome: 'replayed',
      details: { via: 'order-page', merchantOrderNo, attemptsBefore },
    };
  });
}
