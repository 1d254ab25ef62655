import type { Queue } from 'bullmq';
import type { BatchDurabilityCheck, RedisClient } from '@mcb/core/redis';
import { Batcher } from '@mcb/core/batcher';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { callbackJobId, type CallbackJobInput } from '@mcb/core/queue';
import { captureContext } from '@mcb/core/tracing';
import { createStoreBatch, type BatchAdd, type StoreBatchOptions } from './store-batch.ts';

export { variantJobId } from './store-batch.ts';

/** Options of {@link createEnqueuer}: the batch's (timeout, replicas, fence, attempts, onNotDurable) and these. */
export interface EnqueuerOptions extends StoreBatchOptions {
  /** Largest batch of adds. @defaultValue 64 */
  maxBatch?: number;
  /** Told each batch's size as it starts (a metric). */
  onBatch?: (size: number) => void;
}

/** Stores callbacks' jobs durably, many requests' at once. */
export interface Enqueuer {
  /**
   * Add the callback's job under the contract's job id, and resolve once it is durable, as `check` proves it in the
   * batch itself (`waitaof`: after `WAITAOF 1 0`; `config-in-transaction`: the batch's transaction read appendonly
   * yes, appendfsync always and noeviction; `none`: volatile Redis allowed). A duplicate (same id) is a no-op for
   * BullMQ and a success here: the job is already stored.
   * @throws AppError REDIS_NOT_DURABLE (transient): the batch's check found that Redis does not keep it now; the
   *   caller replies failure and the platform retries (the job id is the same, so nothing is stored twice).
   * @throws AppError ENQUEUE_FAILED (transient): the caller replies failure and the platform retries; an add that
   *   timed out may still land, and the retry collapses onto the same id.
   * `opts.queue`: the merchant's queue the job goes to (one batch may hold several merchants' jobs); the enqueuer's
   * own queue when unset.
   */
  enqueue(job: CallbackJobInput, opts: { check: BatchDurabilityCheck; queue?: Queue }): Promise<string>;
}

function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Micro-batched enqueue: requests that arrive together (read in the same turn of the event loop, or while the
 * previous batches are being stored) are added in one transaction on the queue's connection, and each is told
 * `success` only once the whole batch is stored and proven kept by the batch itself: followed by one `WAITAOF` where
 * Redis has it, or with a `CONFIG GET` of the durability settings inside the same transaction where it does not
 * (see BatchDurabilityCheck). When the batch fails (Redis down, WAITAOF short or refused, AOF found off), every
 * request of it fails and answers `503 fail`; none is acknowledged. An add Redis refuses on its own (out of
 * memory) fails alone.
 * @param queue where a job goes unless its enqueue names its own queue (a merchant's)
 * @param redis the connection every queue uses: WAITAOF only covers writes made on its own connection.
 */
export function createEnqueuer(queue: Queue, redis: RedisClient, options: EnqueuerOptions): Enqueuer {
  const batcher = new Batcher<BatchAdd, void>(
    createStoreBatch(queue, redis, options),
    // 'loop-turn': the requests read in one poll of the sockets go as one batch; with 'microtask', each of them would
    // start its own transaction while slots were free (one MULTI per request at half of peak: 20 % of ingest's CPU).
    { maxBatch: options.maxBatch ?? 64, maxInFlight: 4, onBatch: options.onBatch, gather: 'loop-turn' },
  );
  return {
    async enqueue(job, opts) {
      const jobId = callbackJobId(job.kind, job.orderNo, job.state);
      const work = batcher.submit({ job, jobId, check: opts.check, queue: opts.queue, context: captureContext() });
      try {
        await withDeadline(work, options.timeoutMs, 'enqueue');
      } catch (e) {
        work.catch(() => {}); // the late outcome no longer matters; do not let it become an unhandled rejection
        if (e instanceof AppError && e.code === ErrorCodes.REDIS_NOT_DURABLE) throw e;
        throw new AppError(ErrorCodes.ENQUEUE_FAILED, `could not store job ${jobId} durably`, {
          cause: e,
          details: { jobId },
        });
      }
      return jobId;
    },
  };
}

/** Enqueue one callback on its own (scripts and tools; ingest uses {@link createEnqueuer}). */
export async function enqueueCallback(
  queue: Queue,
  redis: RedisClient,
  job: CallbackJobInput,
  opts: { check: BatchDurabilityCheck; timeoutMs: number },
): Promise<string> {
  return createEnqueuer(queue, redis, { timeoutMs: opts.timeoutMs }).enqueue(job, opts);
}
