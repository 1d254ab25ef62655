import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { callbackJobId, callbackJobOptions, type CallbackJobInput } from '@mcb/core/queue';

/** Options of {@link enqueueCallback}. */
export interface EnqueueOptions {
  /** Call `WAITAOF 1 0` after the add (Redis with AOF but a lax fsync policy). */
  waitAof: boolean;
  /** Whole budget of the add (and WAITAOF), in ms; past it the caller replies failure and the platform retries. */
  timeoutMs: number;
}

function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Add the callback's job under the contract's job id and wait until it is durable. A duplicate (same id) is a no-op
 * for BullMQ and a success here: the job is already stored. An add that times out may still land; the platform's
 * retry then collapses onto the same id.
 * @param redis the connection the queue uses: WAITAOF only covers writes made on its own connection.
 * @throws AppError ENQUEUE_FAILED (transient)
 */
export async function enqueueCallback(queue: Queue, redis: Redis, job: CallbackJobInput, opts: EnqueueOptions): Promise<string> {
  const jobId = callbackJobId(job.kind, job.orderNo, job.state);
  const work = (async () => {
    await queue.add(job.kind, job, { ...callbackJobOptions, jobId });
    if (opts.waitAof) {
      const [local] = (await redis.call('WAITAOF', '1', '0', String(opts.timeoutMs))) as [number, number];
      if (local < 1) throw new Error('WAITAOF: the write was not fsynced to the local AOF in time');
    }
  })();
  try {
    await withDeadline(work, opts.timeoutMs, 'enqueue');
  } catch (e) {
    work.catch(() => {}); // the late outcome no longer matters; do not let it become an unhandled rejection
    throw new AppError(ErrorCodes.ENQUEUE_FAILED, `could not store job ${jobId} durably`, {
      cause: e,
      transient: true,
      details: { jobId },
    });
  }
  return jobId;
}
