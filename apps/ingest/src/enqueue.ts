import { createHash } from 'node:crypto';
import { Job, type Queue } from 'bullmq';
import {
  batchDurabilityProblems,
  callBesideKey,
  DURABILITY_CONFIG_GET,
  type BatchDurabilityCheck,
  type RedisClient,
} from '@mcb/core/redis';
import { Batcher } from '@mcb/core/batcher';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { callbackJobId, callbackJobOptions, jobNote, type CallbackJobInput } from '@mcb/core/queue';
import { captureContext } from '@mcb/core/tracing';
import { addAndReadBack, type IdAdd, type TransactionGuard } from './add-and-read-back.ts';
import type { PrimaryFence } from './primary-fence.ts';

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
  /**
   * Asked, once a batch is durable, whether the node written to is still the primary (through Sentinel: a stale
   * primary's writes are refused, not acknowledged). @defaultValue none
   */
  fence?: PrimaryFence;
  /** Attempts of each job (CALLBACK_JOB_ATTEMPTS). @defaultValue callbackJobOptions.attempts (60) */
  attempts?: number;
  /**
   * Told when a batch was refused because Redis no longer keeps it (its check read AOF off, a laxer fsync or an
   * evicting policy, or WAITAOF answered an error), with one line per problem: the app re-reads durability at once
   * (readiness, early 503s) instead of at its next poll. Must not throw.
   */
  onNotDurable?: (problems: string[]) => void;
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
   */
  enqueue(job: CallbackJobInput, opts: { check: BatchDurabilityCheck }): Promise<string>;
}

interface Add extends IdAdd {
  check: BatchDurabilityCheck;
}

/** A batch Redis does not keep now (its own check said so): not acknowledged, and not a Redis outage either. */
function notDurable(problems: string[]): AppError {
  return new AppError(ErrorCodes.REDIS_NOT_DURABLE, `Redis does not keep this batch now: ${problems.join('; ')}`, {
    details: { problems },
  });
}

/** The record's fields (not when or how it arrived): two callbacks with the same ones are the same callback. */
function recordKey(job: Partial<CallbackJobInput>): string {
  const r = job as Record<string, unknown>;
  return JSON.stringify(
    ['kind', 'orderNo', 'merchantNo', 'merchantOrderNo', 'state', 'payTime', 'quantity', 'fiatAmount'].map(
      (k) => r[k] ?? null,
    ),
  );
}

/**
 * The id of a callback whose contract id is taken by a different record (a forgery sent first, or a genuine record
 * after a forgery): the contract id plus a digest of the record, so it gets its own job and is verified now rather
 * than collapsing onto the other one. Its own retries collapse onto it. The receipt in Postgres stays the guard.
 */
export function variantJobId(jobId: string, job: CallbackJobInput): string {
  return `${jobId}-${createHash('sha256').update(recordKey(job)).digest('hex').slice(0, 16)}`;
}

/** A stored job's data, or undefined when it is not a callback job's JSON. */
function parseJobData(data: string): CallbackJobInput | undefined {
  try {
    return JSON.parse(data) as CallbackJobInput;
  } catch {
    return undefined;
  }
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
 * @param redis the connection the queue uses: WAITAOF only covers writes made on its own connection.
 */
export function createEnqueuer(queue: Queue, redis: RedisClient, options: EnqueuerOptions): Enqueuer {
  // WAIT and WAITAOF count the writes of their own connection: on a cluster they must reach the node holding the
  // queue (every key of it shares the prefix's hash tag), so they travel beside one of the queue's keys.
  const anchor = queue.keys.meta!;
  const jobOptions = options.attempts === undefined ? {} : { attempts: options.attempts };
  const told = (problems: string[]) => {
    try {
      options.onNotDurable?.(problems);
    } catch {
      // a listener's failure must not change the batch's outcome
    }
  };
  // On a Redis without WAITAOF the durability check rides in the batch's own transaction: no extra round trip, and
  // it reads the settings at the very moment the adds ran (nothing runs between a transaction's commands).
  const configGuard: TransactionGuard = {
    command: DURABILITY_CONFIG_GET,
    refuse: (reply) => {
      const problems = batchDurabilityProblems(reply);
      if (problems.length === 0) return undefined;
      told(problems);
      return notDurable(problems);
    },
  };
  const batcher = new Batcher<Add, void>(
    async (adds) => {
      const stillPrimary = options.fence?.begin();
      // The strictest check any request of the batch asked for (they differ only while durability is re-read).
      const guard = adds.some((a) => a.check === 'config-in-transaction') ? configGuard : undefined;
      // Every add and its read-back travel in one transaction (one round trip for the batch); each has its own
      // result. Each add runs in the context of the request it came from, so that its span (and the job's trace)
      // is that callback's, whichever request happened to start the batch.
      const outcome: Array<{ ok: true } | { ok: false; error: Error }> = [];
      const first = await addAndReadBack(queue, adds, guard, jobOptions);
      const copies: number[] = [];
      const variants: number[] = [];
      first.forEach((r, i) => {
        if (!r.ok) return void (outcome[i] = r);
        outcome[i] = { ok: true };
        const held = parseJobData(r.data);
        // The id holds another record (a forgery sent first, or the genuine one before a forgery): this record
        // gets a job of its own, and is stored only once that job's read-back shows it.
        if (!held || recordKey(held) !== recordKey(adds[i]!.job)) variants.push(i);
        else if (held.receivedAt !== adds[i]!.job.receivedAt) copies.push(i); // the same callback again (a platform retry or copy)
      });
      if (variants.length > 0) {
        const again = await addAndReadBack(
          queue,
          variants.map((i) => ({ ...adds[i]!, jobId: variantJobId(adds[i]!.jobId, adds[i]!.job) })),
          guard,
          jobOptions,
        );
        variants.forEach((i, k) => {
          const r = again[k]!;
          const held = r.ok ? parseJobData(r.data) : undefined;
          outcome[i] = !r.ok
            ? r
            : held && recordKey(held) === recordKey(adds[i]!.job)
              ? { ok: true }
              : {
                  ok: false,
                  error: new Error(`job ${variantJobId(adds[i]!.jobId, adds[i]!.job)} holds another record`),
                };
        });
      }
      if (copies.length > 0) {
        // Noted on the job for the console's timeline; best effort: a note never decides an acknowledgement.
        await Promise.allSettled(
          copies.map((i) =>
            Job.addJobLog(
              queue,
              adds[i]!.jobId,
              jobNote({
                event: 'received-again',
                at: adds[i]!.job.receivedAt,
                detail: `the same callback reached ingest again (job ${adds[i]!.jobId} already held it)`,
              }),
              callbackJobOptions.keepLogs,
            ),
          ),
        );
      }
      const stored = outcome.some((r) => r.ok);
      if (stored && adds.some((a, i) => a.check === 'waitaof' && outcome[i]!.ok)) {
        // One fsync wait covers every write before it on this connection; if it fails, no add is acknowledged. It
        // errors when AOF is off (Redis refuses numlocal without appendonly): that batch is not kept, so say so.
        let reply: [number, number];
        try {
          reply = (await callBesideKey(redis, anchor, 'WAITAOF', '1', '0', String(options.timeoutMs))) as [
            number,
            number,
          ];
        } catch (e) {
          if (e instanceof Error && e.name === 'ReplyError') {
            const problems = [`WAITAOF refused: ${e.message}`];
            told(problems);
            throw notDurable(problems);
          }
          throw e;
        }
        if (reply[0] < 1) throw new Error('WAITAOF: the writes were not fsynced to the local AOF in time');
      }
      const minReplicas = options.minReplicas ?? 0;
      if (minReplicas > 0 && stored) {
        // Acknowledged means replicated (INGEST_MIN_REPLICAS): WAIT covers every write before it on this connection.
        const replicas = Number(
          await callBesideKey(redis, anchor, 'WAIT', String(minReplicas), String(options.timeoutMs)),
        );
        if (replicas < minReplicas)
          throw new Error(`WAIT: ${replicas} of ${minReplicas} replica(s) acknowledged the writes in time`);
      }
      // Last: the node that holds the batch (and its replicas' WAIT) is still the one the sentinels call primary.
      if (stillPrimary && stored) await stillPrimary();
      return outcome.map((r) => (r.ok ? { ok: true as const, value: undefined } : r));
    },
    // 'loop-turn': the requests read in one poll of the sockets go as one batch; with 'microtask', each of them would
    // start its own transaction while slots were free (one MULTI per request at half of peak: 20 % of ingest's CPU).
    { maxBatch: options.maxBatch ?? 64, maxInFlight: 4, onBatch: options.onBatch, gather: 'loop-turn' },
  );
  return {
    async enqueue(job, opts) {
      const jobId = callbackJobId(job.kind, job.orderNo, job.state);
      const work = batcher.submit({ job, jobId, check: opts.check, context: captureContext() });
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
