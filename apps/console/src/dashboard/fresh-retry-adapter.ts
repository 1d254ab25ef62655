import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { retryKeepingStory } from '@mcb/core/queue';
import type { Job } from 'bullmq';

type BoardJob = NonNullable<Awaited<ReturnType<BullMQAdapter['getJob']>>>;

/**
 * The job with its `retry` giving a fresh retry budget, whatever bull-board passes, and noting how its run before
 * ended.
 */
function freshRetry<T extends BoardJob | undefined>(job: T): T {
  if (!job) return job;
  const bullJob = job as unknown as Job;
  const retry = bullJob.retry.bind(bullJob);
  bullJob.retry = (state, opts) =>
    retryKeepingStory(Object.assign(Object.create(bullJob) as Job, { retry }), state ?? 'failed', opts);
  return job;
}

/**
 * bull-board's BullMQ adapter whose retry of a job resets its attempt counts
 * (REPLAY_RETRY_OPTIONS): bull-board's handlers call `job.retry(state)` on the jobs this adapter hands them, and
 * BullMQ would otherwise keep the count, giving a job that had used its attempts one last attempt.
 */
export class FreshRetryBullMQAdapter extends BullMQAdapter {
  override async getJob(id: string) {
    return freshRetry(await super.getJob(id));
  }

  override async getJobs(...args: Parameters<BullMQAdapter['getJobs']>) {
    return (await super.getJobs(...args)).map((job) => freshRetry(job));
  }
}
