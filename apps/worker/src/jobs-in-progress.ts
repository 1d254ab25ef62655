import type { Logger } from '@mcb/core/logger';
import type { Job } from 'bullmq';

/**
 * What a forced stop needs of a worker: a BullMQ Worker (the maintenance queue's) or the callback worker's group of
 * fetch loops. `name` is the queue's.
 */
export interface StoppableWorker {
  readonly name: string;
  on(event: 'active', listener: (job: Job) => void): unknown;
  on(event: 'completed' | 'failed', listener: (job: Job | undefined) => void): unknown;
  cancelAllJobs(reason?: string): void;
  close(force?: boolean): Promise<void>;
  disconnect(): Promise<void>;
}

/**
 * Ids of the jobs a worker took and has not yet recorded as completed or failed in Redis. BullMQ's own tracking
 * lets go of a job before its completion is written; a job whose completion could not be written (Redis gone) is
 * still in progress as far as the queue knows: it runs again once its lock lapses.
 */
export function trackJobsInProgress(worker: StoppableWorker): () => string[] {
  const ids = new Set<string>();
  worker.on('active', (job: Job) => void (job.id && ids.add(job.id)));
  const settled = (job: Job | undefined) => void (job?.id && ids.delete(job.id));
  worker.on('completed', settled);
  worker.on('failed', settled);
  return () => [...ids];
}

/** Most job ids written on the forced-stop line; the count is always complete. */
const MAX_IDS_LOGGED = 1000;

/**
 * A shutdown that ran out of time: say once which jobs are left in progress, abort their processors (a Get order in
 * flight stops), and drop the worker's connections without waiting for Redis. Their locks lapse and another worker
 * runs them again; the receipt's unique (OrderNo, state) keeps a job that had already committed from crediting twice.
 */
export async function forceCloseWorker(
  worker: StoppableWorker,
  inProgress: () => string[],
  logger: Logger,
): Promise<void> {
  const jobIds = inProgress();
  logger.warn(
    { queue: worker.name, jobsLeft: jobIds.length, jobIds: jobIds.slice(0, MAX_IDS_LOGGED) },
    `stop forced: ${jobIds.length} ${worker.name} job(s) left in progress; they run again once their locks lapse`,
  );
  worker.cancelAllJobs('shutdown forced');
  // BullMQ's forced close, if no close has started yet; one under way is returned as it is, so disconnect too: it drops
  // the sockets now instead of waiting for a QUIT that Redis cannot answer.
  void worker.close(true).catch(() => undefined);
  await worker.disconnect();
}

/**
 * The `force` of a worker's releaser: tracks its jobs from now on, and force-closes it with {@link forceCloseWorker}.
 */
export function forcedClose(worker: StoppableWorker, logger: Logger): () => Promise<void> {
  const inProgress = trackJobsInProgress(worker);
  return () => forceCloseWorker(worker, inProgress, logger);
}
