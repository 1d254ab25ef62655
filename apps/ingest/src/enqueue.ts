import { createHash } from 'node:crypto';
import { Job, type Queue } from 'bullmq';
import { callBesideKey, type RedisClient } from '@mcb/core/redis';
import { Batcher } from '@mcb/core/batcher';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { callbackJobId, callbackJobOptions, jobNote, type CallbackJobInput } from '@mcb/core/queue';
import { captureContext, withContext, type Context } from '@mcb/core/tracing';

/** Options of {@link createEnqueuer}. */
export interface EnqueuerOptions {
  /** Whole budget of one request's enqueue (waiting for its batch, the add and WAITAOF), in ms. */
  timeoutMs: number;
  /** Replicas that must hold a batch (Redis `WAIT`) before any of it is acknowledged. @defaultValue 0 */
  minReplicas?: number;
  /** Largest batch of adds. @defaultValue 64 */
  maxBatch?: number;
  /** Told each batch's size as it starts (a metric). */
  onBatch?: (size: number) => void;
}

/** Stores callbacks' jobs durably, many requests' at once. */
export interface Enqueuer {
  /**
   * Add the callback's job under the contract's job id, and resolve once it is durable (`waitAof`: after
   * `WAITAOF 1 0`). A duplicate (same id) is a no-op for BullMQ and a success here: the job is already stored.
   * @throws AppError ENQUEUE_FAILED (transient): the caller replies failure and the platform retries; an add that
   *   timed out may still land, and the retry collapses onto the same id.
   */
  enqueue(job: CallbackJobInput, opts: { waitAof: boolean }): Promise<string>;
}

interface Add {
  job: CallbackJobInput;
  jobId: string;
  waitAof: boolean;
  /** The request's trace context (tracing on only). */
  context: Context | undefined;
}

/** The record's fields (not when or how it arrived): two callbacks with the same ones are the same callback. */
function recordKey(job: Partial<CallbackJobInput>): string {
  const r = job as Record<string, unknown>;
  return JSON.stringify(['kind', 'orderNo', 'merchantNo', 'merchantOrderNo', 'state', 'payTime', 'quantity', 'fiatAmount'].map((k) => r[k] ?? null));
}

/**
 * The id of a callback whose contract id is taken by a different record (a forgery sent first, or a genuine record
 * after a forgery): the contract id plus a digest of the record, so it gets its own job and is verified now rather
 * than collapsing onto the other one. Its own retries collapse onto it. The receipt in Postgres stays the guard.
 */
export function variantJobId(jobId: string, job: CallbackJobInput): string {
  return `${jobId}-${createHash('sha256').update(recordKey(job)).digest('hex').slice(0, 16)}`;
}

function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Micro-batched enqueue: requests that arrive together (the same tick, or while the previous batch is being
 * stored) are added in one pipeline on the queue's connection followed by one `WAITAOF`, and each is told
 * `success` only once the whole batch is stored and fsynced. When the batch fails (Redis down, WAITAOF short),
 * every request of it fails and answers `503 fail`; none is acknowledged. An add Redis refuses on its own (out
 * of memory) fails alone.
 * @param redis the connection the queue uses: WAITAOF only covers writes made on its own connection.
 */
export function createEnqueuer(queue: Queue, redis: RedisClient, options: EnqueuerOptions): Enqueuer {
  // WAIT and WAITAOF count the writes of their own connection: on a cluster they must reach the node holding the
  // queue (every key of it shares the prefix's hash tag), so they travel beside one of the queue's keys.
  const anchor = queue.keys.meta!;
  const batcher = new Batcher<Add, void>(
    async (adds) => {
      // Every add is written to the connection at once (a pipeline: one round trip for the batch); each has its
      // own result, so when Redis refuses part of a batch (out of memory) only the refused ones fail.
      // Each add runs in the context of the request it came from, so that its span (and the job's trace) is that
      // callback's, whichever request happened to start the batch.
      const add = (a: Add, jobId: string) => withContext(a.context, () => queue.add(a.job.kind, a.job, { ...callbackJobOptions, jobId }));
      const added = await Promise.allSettled(adds.map((a) => add(a, a.jobId)));
      // An add onto an existing id is a no-op: check that the stored record is this one. When it differs (a forged
      // record took the id first), this record gets a job of its own.
      const stored = await Promise.all(
        adds.map((a, i) =>
          added[i]!.status === 'fulfilled' ? redis.hget(`${queue.qualifiedName}:${a.jobId}`, 'data').catch(() => null) : Promise.resolve(null),
        ),
      );
      const copies: number[] = [];
      const variants = adds.flatMap((a, i) => {
        const data = stored[i];
        if (!data) return [];
        try {
          const held = JSON.parse(data) as CallbackJobInput;
          if (recordKey(held) !== recordKey(a.job)) return [i];
          if (held.receivedAt !== a.job.receivedAt) copies.push(i); // the same callback again (a platform retry or copy)
          return [];
        } catch {
          return [i];
        }
      });
      if (copies.length > 0) {
        // Noted on the job for the console's timeline; best effort: a note never decides an acknowledgement.
        await Promise.allSettled(
          copies.map((i) =>
            Job.addJobLog(queue, adds[i]!.jobId, jobNote({ event: 'received-again', at: adds[i]!.job.receivedAt, detail: `the same callback reached ingest again (job ${adds[i]!.jobId} already held it)` }), callbackJobOptions.keepLogs),
          ),
        );
      }
      if (variants.length > 0) {
        const again = await Promise.allSettled(variants.map((i) => add(adds[i]!, variantJobId(adds[i]!.jobId, adds[i]!.job))));
        variants.forEach((i, k) => {
          if (again[k]!.status === 'rejected') added[i] = again[k]!;
        });
      }
      if (adds.some((a, i) => a.waitAof && added[i]!.status === 'fulfilled')) {
        // One fsync wait covers every write before it on this connection; if it fails, no add is acknowledged.
        const [local] = (await callBesideKey(redis, anchor, 'WAITAOF', '1', '0', String(options.timeoutMs))) as [number, number];
        if (local < 1) throw new Error('WAITAOF: the writes were not fsynced to the local AOF in time');
      }
      const minReplicas = options.minReplicas ?? 0;
      if (minReplicas > 0 && added.some((r) => r.status === 'fulfilled')) {
        // Acknowledged means replicated (INGEST_MIN_REPLICAS): WAIT covers every write before it on this connection.
        const replicas = Number(await callBesideKey(redis, anchor, 'WAIT', String(minReplicas), String(options.timeoutMs)));
        if (replicas < minReplicas) throw new Error(`WAIT: ${replicas} of ${minReplicas} replica(s) acknowledged the writes in time`);
      }
      return added.map((r) => (r.status === 'fulfilled' ? { ok: true as const, value: undefined } : { ok: false as const, error: r.reason }));
    },
    { maxBatch: options.maxBatch ?? 64, maxInFlight: 4, onBatch: options.onBatch },
  );
  return {
    async enqueue(job, opts) {
      const jobId = callbackJobId(job.kind, job.orderNo, job.state);
      const work = batcher.submit({ job, jobId, waitAof: opts.waitAof, context: captureContext() });
      try {
        await withDeadline(work, options.timeoutMs, 'enqueue');
      } catch (e) {
        work.catch(() => {}); // the late outcome no longer matters; do not let it become an unhandled rejection
        throw new AppError(ErrorCodes.ENQUEUE_FAILED, `could not store job ${jobId} durably`, {
          cause: e,
          transient: true,
          details: { jobId },
        });
      }
      return jobId;
    },
  };
}

/** Enqueue one callback on its own (scripts and tools; ingest uses {@link createEnqueuer}). */
export async function enqueueCallback(queue: Queue, redis: RedisClient, job: CallbackJobInput, opts: { waitAof: boolean; timeoutMs: number }): Promise<string> {
  return createEnqueuer(queue, redis, { timeoutMs: opts.timeoutMs }).enqueue(job, opts);
}
