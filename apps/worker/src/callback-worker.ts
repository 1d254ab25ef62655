import { AppError, ErrorCodes, coerceError, firstLineOf } from '@mcb/core/errors';
import { createLogThrottle } from '@mcb/core/logger';
import type { RedisClient, RedisHealth } from '@mcb/core/redis';
import { activeSpan, markFailed, orderAttributes, queueTelemetry } from '@mcb/core/tracing';
import {
  CALLBACK_BACKOFF,
  CALLBACKS_QUEUE,
  callbackJobSchema,
  jobNote,
  jobNoteSchema,
  type CallbackJobInput,
} from '@mcb/core/queue';
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import {
  applyEvent,
  callbackBackoffDelay,
  classifyError,
  createSettlementBatchers,
  describeJobError,
  giveUp,
  inDoubtReceiptOf,
  jobErrorCode,
  toJobError,
  type ApplyDeps,
  type ApplyOutcome,
  type BackoffOptions,
} from '@mcb/settlement';
import { alertOnReviewOpened, type Alerter } from './alerts.ts';
import type { AdaptiveLimit } from './adaptive-concurrency.ts';
import {
  attemptReport,
  createArrivalRecorder,
  WORKER_ARRIVAL_WAITS,
  type ArrivalRecorder,
} from './arrival-recorder.ts';
import { groupFetchLoops, shareOf, type FetchLoopGroup } from './fetch-loops.ts';
import type { WorkerMetrics } from './metrics.ts';

/** How often the adaptive limit folds its samples into a new limit. */
const LIMIT_WINDOW_MS = 100;

/** What {@link createCallbackWorker} needs, beyond {@link ApplyDeps}. */
export interface CallbackWorkerDeps extends ApplyDeps {
  metrics?: WorkerMetrics;
  /**
   * Largest group commit: verified events of concurrent jobs are committed together, one transaction per batch
   * (WORKER_COMMIT_BATCH). Ignored when `batchers` is given. @defaultValue 64
   */
  commitBatch?: number;
  /** A `worker`-role Redis connection (`createRedis(url, 'worker')`); the caller closes it after the worker. */
  connection: RedisClient;
  /**
   * Where the worker's errors are logged (one line per interval, connection errors once for the connection); without
   * it they are logged here, at most one line per 10 s. @defaultValue none
   */
  redisHealth?: RedisHealth;
  /** BullMQ key prefix (QUEUE_PREFIX). @defaultValue 'mcb' */
  prefix?: string;
  /**
   * Jobs processed at once by this instance, fixed (WORKER_CONCURRENCY). Ignored when `adaptive` is given.
   * @defaultValue 256
   */
  concurrency?: number;
  /**
   * An adaptive limit of the jobs in flight (see adaptive-concurrency.ts), fed with Get order's latency by the
   * platform guard; the worker applies it every 100 ms. @defaultValue none: `concurrency` is fixed
   */
  adaptive?: AdaptiveLimit;
  /**
   * BullMQ Workers in this process that share the jobs in flight (fetch-loops.ts: a Worker starts none of the jobs
   * it fetches until its free slots are full, so one Worker with many free slots processes nothing while it fills
   * them one fetch at a time). @defaultValue 4 with `adaptive`, else 1
   */
  fetchLoops?: number;
  /**
   * How long a job whose Get order found the platform's circuit breaker open (PLATFORM_CIRCUIT_OPEN) is put back as
   * delayed, in ms (with up to 50% jitter). Such a wait does not consume an attempt. @defaultValue 5000
   */
  circuitRedelayMs?: number;
  /**
   * How long after it was first seen a job may keep waiting for the open breaker without consuming attempts, in ms:
   * past it, each wait counts as a failed attempt again, so a job cannot wait forever (it ends failed for good, with
   * its alert). @defaultValue 86400000 (a day)
   */
  circuitWaitBoundMs?: number;
  /** The CALLBACK_BACKOFF strategy's scale and cap. @defaultValue base 1 s, cap 10 min */
  backoff?: BackoffOptions;
  /** Job lock, in ms; a job whose lock lapses (its worker died) is run again. Keep it above PLATFORM_TIMEOUT. @defaultValue 30000 */
  lockDurationMs?: number;
  /** How often stalled jobs are looked for, in ms. @defaultValue 30000 */
  stalledIntervalMs?: number;
  /**
   * How many times a job may stall (its worker died holding it) before it fails for good. A callback job is cheap
   * and idempotent (the receipt guards the credit), so a few deaths of its workers (a deploy, an OOM elsewhere, a
   * node drained twice) must not fail it; only a job that keeps killing its workers should. @defaultValue 10
   */
  maxStalledCount?: number;
  /** This instance's name, recorded on each job as `processedBy`. @defaultValue none */
  name?: string;
  /** Start consuming at once. @defaultValue true */
  autorun?: boolean;
  /** Told when a job fails for good and when a review is opened (not when an open one is seen again). @defaultValue none */
  alerts?: Alerter;
  /**
   * Remove a job once it ends in review, so its id is free again. Job ids are the contract's
   * `{kind}-{OrderNo}-{state}`: a forged callback for a real pair that reaches review first would otherwise keep
   * the genuine callback's job id taken for days, and the genuine one would wait for the reconciliation sweep.
   * The review itself stays in Postgres. Tests that read a review job's return value turn this off.
   * @defaultValue true
   */
  releaseReviewedJobIds?: boolean;
  /**
   * Most events waiting at once for their order to be registered (VERIFY_ORDER_UNKNOWN), tracked in Redis. Beyond
   * it a new one goes to review at once (a row in Postgres) instead of holding ~1 KiB of Redis for
   * ORDER_GRACE_PERIOD: forged callbacks for unknown orders cannot fill Redis. A genuine one that landed in review
   * is still credited by the reconciliation sweep once its order is registered (WORKER_MAX_UNKNOWN_WAITING).
   * 0 disables the cap. @defaultValue 10000
   */
  maxUnknownWaiting?: number;
  /**
   * Where each job's arrival and attempt outcomes are recorded for the console's search (callback_arrivals),
   * batched and off the job's path. @defaultValue a recorder on `db`
   */
  arrivals?: ArrivalRecorder;
}

/**
 * The callbacks queue's worker: the first of its fetch loops, standing for all of them (their events, close, pause).
 * `close()` waits for the jobs in progress (graceful shutdown).
 */
export type CallbackWorker = FetchLoopGroup<Worker<CallbackJobInput, ApplyOutcome>>;

/** A failure that leaves the job in the failed set (a permanent error, or its last attempt), not a retry. */
function isFinalFailure(job: Job, err: Error): boolean {
  const permanent = err instanceof UnrecoverableError || err.name === 'UnrecoverableError';
  return permanent || job.attemptsMade >= (job.opts.attempts ?? 1);
}

function firstSeenAt(job: Job, receivedAt: string): number {
  const received = Date.parse(receivedAt);
  return Number.isNaN(received) ? job.timestamp : Math.min(received, job.timestamp);
}

/**
 * A BullMQ Worker on CALLBACKS_QUEUE that runs {@link applyEvent} for each job, with the CALLBACK_BACKOFF
 * strategy registered. A job's result is its ApplyOutcome; "deferred" and transient errors are retried with
 * backoff; permanent errors fail the job at once (UnrecoverableError) and it is kept for replay. On its last
 * attempt a job that would still wait is decided (sent to review) instead of failing silently.
 */
export function createCallbackWorker(deps: CallbackWorkerDeps): CallbackWorker {
  const { metrics, logger } = deps;
  const applyDeps: ApplyDeps = {
    ...deps,
    batchers:
      deps.batchers ??
      createSettlementBatchers(deps.db, {
        maxCommitBatch: deps.commitBatch,
        onBatch: metrics && ((batch, size) => metrics.batchSize.observe({ batch }, size)),
      }),
    ...(deps.alerts && !deps.onReviewOpened ? { onReviewOpened: alertOnReviewOpened(deps.alerts) } : {}),
  };

  const arrivals = deps.arrivals ?? createArrivalRecorder(deps.db, logger, WORKER_ARRIVAL_WAITS);
  const prefix = deps.prefix ?? 'mcb';
  const unknownKey = `${prefix}:${CALLBACKS_QUEUE}:unknown-order-waiting`;
  const maxUnknown = deps.maxUnknownWaiting ?? 10_000;
  const graceMs = deps.orderGracePeriodMs ?? 15 * 60_000;
  /** Count this job among those waiting for their order; true when the cap is exceeded (decide it now). */
  const overUnknownCap = async (jobId: string): Promise<boolean> => {
    if (maxUnknown <= 0) return false;
    const now = Date.now();
    const replies = await deps.connection
      .multi()
      .zremrangebyscore(unknownKey, 0, now - graceMs - 3_600_000)
      .zadd(unknownKey, 'NX', now, jobId)
      .zcard(unknownKey)
      .exec();
    const count = Number(replies?.[2]?.[1] ?? 0);
    if (count <= maxUnknown) return false;
    await deps.connection.zrem(unknownKey, jobId);
    return true;
  };

  /** Whether one of the job's notes (an earlier failed attempt) says this receipt's COMMIT was in doubt. */
  const noteSaysInDoubt = async (job: Job, receiptId: number): Promise<boolean> => {
    const lines = await deps.connection.lrange(worker.toKey(`${job.id}:logs`), 0, -1);
    return lines.some((line) => {
      try {
        const note = jobNoteSchema.parse(JSON.parse(line));
        return note.code === ErrorCodes.DB_COMMIT_IN_DOUBT && inDoubtReceiptOf(note.detail) === receiptId;
      } catch {
        return false; // not one of our notes
      }
    });
  };

  const { adaptive } = deps;
  const processor = async (
    job: Job<CallbackJobInput, ApplyOutcome>,
    token?: string,
    signal?: AbortSignal,
  ): Promise<ApplyOutcome> => {
    adaptive?.jobStarted();
    metrics?.inFlight.inc();
    try {
      return await attempt(job, token, signal);
    } finally {
      adaptive?.jobEnded();
      metrics?.inFlight.dec();
    }
  };
  const circuitRedelayMs = deps.circuitRedelayMs ?? 5000;
  const circuitWaitBoundMs = deps.circuitWaitBoundMs ?? 24 * 3600_000;
  const attempt = async (
    job: Job<CallbackJobInput, ApplyOutcome>,
    token?: string,
    signal?: AbortSignal,
  ): Promise<ApplyOutcome> => {
    const started = performance.now();
    const kind = job.name === 'payin' || job.name === 'payout' ? job.name : 'unknown';
    // BullMQ's process span (tracing on): this attempt, in the callback's trace.
    const span = activeSpan();
    const finish = (outcome: string) => {
      span?.setAttribute('mcb.outcome', outcome);
      metrics?.jobs.inc({ kind, outcome });
      metrics?.jobDuration.observe({ kind, outcome }, (performance.now() - started) / 1000);
    };
    const parsed = callbackJobSchema.safeParse(job.data);
    if (!parsed.success) {
      finish('failed');
      const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
      logger.error({ jobId: job.id, jobName: job.name }, `invalid job payload: ${issues}`);
      throw giveUp(new AppError(ErrorCodes.JOB_PAYLOAD_INVALID, issues));
    }
    const event = parsed.data;
    arrivals.taken(job, event);
    const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    span?.setAttributes({ ...orderAttributes(event), 'mcb.job_id': job.id ?? '', 'mcb.attempt': job.attemptsMade + 1 });
    let deferred = false;
    try {
      const options = {
        firstSeenAt: firstSeenAt(job, event.receivedAt),
        jobId: job.id,
        signal,
        noWait: lastAttempt,
        // A receipt this job's earlier attempt committed without hearing back is its own credit (not a duplicate).
        ...(job.attemptsMade > 0 ? { wasInDoubt: (receiptId: number) => noteSaysInDoubt(job, receiptId) } : {}),
      };
      let outcome = await applyEvent(event, applyDeps, options);
      if (
        outcome.status === 'deferred' &&
        outcome.code === ErrorCodes.VERIFY_ORDER_UNKNOWN &&
        (await overUnknownCap(job.id!))
      ) {
        logger.warn(
          { jobId: job.id, orderNo: event.orderNo, maxUnknownWaiting: maxUnknown },
          'too many events wait for unknown orders: this one goes to review now',
        );
        outcome = await applyEvent(event, applyDeps, { ...options, noWait: true });
      } else if (outcome.status !== 'deferred' && job.attemptsMade > 0 && maxUnknown > 0) {
        // It may have waited for its order before: no longer.
        await deps.connection.zrem(unknownKey, job.id!).catch(() => 0);
      }
      if (outcome.status === 'deferred') {
        deferred = true;
        throw new AppError(outcome.code, outcome.reason, { transient: true });
      }
      finish(outcome.status === 'applied' ? outcome.outcome : outcome.status);
      arrivals.settled(job, event, attemptReport(outcome));
      return outcome;
    } catch (e) {
      const err = toJobError(e);
      // The platform's breaker is open and stayed open for the guard's whole wait: an outage elsewhere, not this job's
      // failure. Put the job back as delayed without consuming an attempt (BullMQ's moveToDelayed skips the count),
      // noted on its timeline and counted as a retry, up to a bound from when it was first seen.
      if (
        err instanceof AppError &&
        err.code === ErrorCodes.PLATFORM_CIRCUIT_OPEN &&
        token &&
        Date.now() - firstSeenAt(job, event.receivedAt) < circuitWaitBoundMs
      ) {
        const code = err.code;
        finish('retry');
        metrics?.retries.inc({ kind, code });
        arrivals.settled(job, event, { status: 'waiting', code, detail: firstLineOf(err) });
        await job
          .log(
            jobNote({
              event: 'attempt-waiting',
              attempt: job.attemptsMade + 1,
              code,
              detail: `${describeJobError(err)}; put back without using an attempt`,
            }),
          )
          .catch(() => 0);
        logger.warn(
          { jobId: job.id, orderNo: event.orderNo, code },
          'Get order paused by the circuit breaker: job put back, no attempt used',
        );
        await job.moveToDelayed(Date.now() + Math.round(circuitRedelayMs * (1 + Math.random() / 2)), token);
        throw new DelayedError();
      }
      const transient = classifyError(err) === 'transient' && !lastAttempt;
      const code = jobErrorCode(err);
      finish(transient ? 'retry' : 'failed');
      // A final failure is recorded by the 'failed' listener below, once the job is in the failed set (replayable).
      if (transient)
        arrivals.settled(job, event, { status: deferred ? 'waiting' : 'retrying', code, detail: firstLineOf(err) });
      markFailed(span, err);
      if (transient) metrics?.retries.inc({ kind, code });
      const ids = {
        jobId: job.id,
        orderNo: event.orderNo,
        state: event.state,
        merchantOrderNo: event.merchantOrderNo,
        attempt: job.attemptsMade + 1,
      };
      // The console's timeline of this callback: each attempt that did not settle it, with its code and why.
      await job
        .log(
          jobNote({
            event: deferred ? 'attempt-waiting' : 'attempt-failed',
            attempt: job.attemptsMade + 1,
            code,
            detail: describeJobError(err),
          }),
        )
        .catch(() => 0); // a note that cannot be written changes nothing about the job
      if (transient) logger.warn({ ...ids, code, err: coerceError(e) }, `attempt failed, will retry: ${err.message}`);
      else logger.error({ ...ids, code, err: coerceError(e) }, `job failed for good (kept for replay): ${err.message}`);
      throw err;
    }
  };

  const loops = Math.max(1, Math.floor(deps.fetchLoops ?? (adaptive ? 4 : 1)));
  const allowed = adaptive?.limit ?? deps.concurrency ?? 256;
  const loop = (i: number) =>
    new Worker<CallbackJobInput, ApplyOutcome>(CALLBACKS_QUEUE, processor, {
      connection: deps.connection,
      prefix: deps.prefix ?? 'mcb',
      name: deps.name,
      concurrency: shareOf(allowed, loops, i),
      autorun: deps.autorun ?? true,
      lockDuration: deps.lockDurationMs ?? 30_000,
      stalledInterval: deps.stalledIntervalMs ?? 30_000,
      maxStalledCount: deps.maxStalledCount ?? 10,
      // Tracing on: each attempt is a span in the trace its callback started at ingest (context carried in the job).
      ...queueTelemetry(),
      settings: {
        // Registered for CALLBACK_BACKOFF; any other custom type gets the same safe delay rather than no retry.
        backoffStrategy: (attemptsMade: number, type?: string) => {
          if (type !== CALLBACK_BACKOFF) logger.warn({ type }, 'unknown backoff type; using the callback backoff');
          return callbackBackoffDelay(attemptsMade, deps.backoff);
        },
      },
    });
  const worker: CallbackWorker = groupFetchLoops([
    loop(0),
    ...Array.from({ length: loops - 1 }, (_, i) => loop(i + 1)),
  ]);
  // An 'error' without a listener would crash the process; BullMQ reconnects on its own. A Redis at maxmemory
  // (noeviction) refuses every BullMQ script with OOM and BullMQ's loop would retry at once, spinning: pause fetching
  // with a growing backoff instead, and log at most one line per 10 s. Jobs in flight still try to complete.
  let oomBackoffMs = 0;
  let resumeTimer: NodeJS.Timeout | undefined;
  const logThrottled = createLogThrottle(logger);
  worker.on('error', (e) => {
    if (!/\bOOM\b/.test(coerceError(e).message)) {
      if (deps.redisHealth) return deps.redisHealth.report('callback worker', e);
      return void logThrottled('callback worker', 'error', { err: coerceError(e) }, 'callback worker error');
    }
    metrics?.redisOom.inc();
    if (resumeTimer) return;
    oomBackoffMs = Math.min(oomBackoffMs ? oomBackoffMs * 2 : 500, 30_000);
    metrics?.redisOomBackoff.set(oomBackoffMs / 1000);
    logThrottled(
      'redis oom',
      'error',
      { err: coerceError(e), backoffMs: oomBackoffMs },
      'Redis is out of memory (maxmemory, noeviction): pausing job fetching',
    );
    void worker.pause(true).catch(() => {});
    resumeTimer = setTimeout(() => {
      resumeTimer = undefined;
      void worker.resume();
    }, oomBackoffMs);
    resumeTimer.unref();
  });
  worker.on('completed', () => {
    if (oomBackoffMs === 0) return;
    oomBackoffMs = 0;
    metrics?.redisOomBackoff.set(0);
  });
  worker.on('closing', () => clearTimeout(resumeTimer));
  metrics?.inFlightLimit.set(allowed);
  if (adaptive) {
    // The limit follows Get order's latency and failures (Little's law), spread over the fetch loops; BullMQ reads
    // each loop's share before each fetch.
    const retune = setInterval(() => {
      const limit = adaptive.update();
      worker.fetchLoops.forEach((l, i) => (l.concurrency = shareOf(limit, loops, i)));
      metrics?.inFlightLimit.set(limit);
      // 100 ms: a full limit doubles per window, so at 500 ms of Get order it reaches ~throughput x latency within
      // about 0.3 s of the first replies (250 ms windows took 0.75 s, a quarter of a 3,000-callback burst).
    }, LIMIT_WINDOW_MS);
    retune.unref();
    worker.on('closing', () => clearInterval(retune));
  }
  // The last attempts' rows are written before close() resolves (and the caller closes the pool).
  const close = worker.close.bind(worker);
  worker.close = async (force?: boolean) => {
    await close(force);
    await arrivals.flush();
  };
  if (deps.releaseReviewedJobIds ?? true) {
    worker.on('completed', (job, result) => {
      if (result?.status !== 'review') return;
      job
        .remove()
        .catch((e: unknown) =>
          logger.warn({ jobId: job.id, err: coerceError(e) }, 'could not release the job id of a reviewed job'),
        );
    });
  }
  worker.on('failed', (job, err) => {
    if (!job || !isFinalFailure(job, err)) return;
    const parsed = callbackJobSchema.safeParse(job.data);
    if (parsed.success)
      arrivals.settled(job, parsed.data, {
        status: 'failed',
        code: jobErrorCode(err),
        detail: firstLineOf(err),
        attempts: job.attemptsMade,
      });
  });
  worker.on('stalled', (jobId) => logger.warn({ jobId }, 'job stalled (its worker died or hung); it runs again'));
  // 'failed' fires for every failed attempt; only the last one (or a permanent error) is worth a person's time.
  worker.on('failed', (job, err) => {
    if (!deps.alerts || !job || !isFinalFailure(job, err)) return;
    const data = (job.data ?? {}) as Partial<Record<'orderNo' | 'merchantOrderNo', unknown> & { state: unknown }>;
    deps.alerts.notify({
      type: 'job.exhausted',
      queue: CALLBACKS_QUEUE,
      jobId: job.id ?? '',
      jobName: job.name,
      orderNo: typeof data.orderNo === 'string' ? data.orderNo : undefined,
      state: typeof data.state === 'number' ? data.state : undefined,
      merchantOrderNo: typeof data.merchantOrderNo === 'string' ? data.merchantOrderNo : undefined,
      attemptsMade: job.attemptsMade,
      reason: (job.failedReason ?? err.message).slice(0, 500),
    });
  });
  return worker;
}
