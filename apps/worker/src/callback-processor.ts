import { AppError, ErrorCodes, coerceError, firstLineOf } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { callbackJobSchema, jobNote, type CallbackJob, type CallbackJobInput } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';
import { activeSpan, markFailed, orderAttributes } from '@mcb/core/tracing';
import { DelayedError, type Job, type Processor } from 'bullmq';
import {
  applyEvent,
  classifyError,
  describeJobError,
  giveUp,
  jobErrorCode,
  toJobError,
  type ApplyDeps,
  type ApplyOptions,
  type ApplyOutcome,
} from '@mcb/settlement';
import type { AdaptiveLimit } from './adaptive-concurrency.ts';
import { attemptReport, type ArrivalRecorder } from './arrival-recorder.ts';
import { noteSaysInDoubt } from './in-doubt-notes.ts';
import type { WorkerMetrics } from './metrics.ts';
import { reviewMisroutedJob } from './misrouted-job.ts';
import type { UnknownOrderCap } from './unknown-order-cap.ts';

/** What {@link createCallbackProcessor} needs: the callback worker's pieces, built by `createCallbackWorker`. */
export interface CallbackProcessorDeps {
  /** The money path's dependencies (@mcb/settlement). */
  applyDeps: ApplyDeps;
  arrivals: ArrivalRecorder;
  unknownOrders: UnknownOrderCap;
  /** The worker's Redis connection, where a job's notes are read. */
  connection: RedisClient;
  /** The Redis key of one of the queue's keys (a job's notes: `{jobId}:logs`). */
  queueKey: (type: string) => string;
  logger: Logger;
  metrics?: WorkerMetrics;
  adaptive?: AdaptiveLimit;
  /** The lane's merchant number: a job carrying another is not settled (misrouted-job.ts). @defaultValue no check */
  merchantNo?: string;
  /** How long a job is put back while the platform's breaker is open, in ms (with up to 50% jitter). */
  circuitRedelayMs: number;
  /** How long after it was first seen a job may wait for the open breaker without using attempts, in ms. */
  circuitWaitBoundMs: number;
  /**
   * The lane's merchant is paused (merchant-pause.ts): a job taken now (fetched just before the pause was seen) is put
   * back as delayed without using an attempt, and runs after the resume. @defaultValue never paused
   */
  paused?: () => boolean;
}

type CallbackJobOf = Job<CallbackJobInput, ApplyOutcome>;

/** One attempt at a job, as its metrics, span and notes describe it. */
interface Attempt {
  job: CallbackJobOf;
  kind: 'payin' | 'payout' | 'unknown';
  /** This attempt's number, from 1. */
  number: number;
  /** The job's last attempt: an event that would still wait is decided (review) instead. */
  last: boolean;
  /** BullMQ's process span (tracing on): this attempt, in the callback's trace. */
  span: ReturnType<typeof activeSpan>;
  /** Count the attempt under `outcome` (the job metrics, the span). */
  finish(outcome: string): void;
}

/**
 * The processor of a callback job: {@link applyEvent} with the job's retry policy around it. A job's result is its
 * ApplyOutcome; "deferred" and transient errors are retried with backoff; permanent errors fail the job at once
 * (UnrecoverableError) and it is kept for replay.
 */
export function createCallbackProcessor(deps: CallbackProcessorDeps): Processor<CallbackJobInput, ApplyOutcome> {
  return async (job, token, signal) => {
    if (deps.paused?.() && token) return putBackWhilePaused(job, token);
    deps.adaptive?.jobStarted();
    deps.metrics?.inFlight.inc();
    try {
      return await processCallback(deps, job, token, signal);
    } finally {
      deps.adaptive?.jobEnded();
      deps.metrics?.inFlight.dec();
    }
  };
}

/** One attempt: parse the job, confirm and settle its event, report the outcome, or handle the error. */
async function processCallback(
  deps: CallbackProcessorDeps,
  job: CallbackJobOf,
  token?: string,
  signal?: AbortSignal,
): Promise<ApplyOutcome> {
  const attempt = beginAttempt(deps, job);
  const event = parseJob(deps, attempt);
  deps.arrivals.taken(job, event);
  let waiting = false;
  try {
    const misrouted = deps.merchantNo !== undefined && event.merchantNo !== deps.merchantNo;
    const outcome = misrouted
      ? await reviewMisroutedJob({ ...deps.applyDeps, logger: deps.logger }, event, deps.merchantNo!, job.id)
      : await confirmAndSettle(deps, attempt, event, signal);
    if (outcome.status === 'deferred') {
      waiting = true;
      throw new AppError(outcome.code, outcome.reason, { transient: true });
    }
    attempt.finish(outcome.status === 'applied' ? outcome.outcome : outcome.status);
    deps.arrivals.settled(job, event, attemptReport(outcome));
    return outcome;
  } catch (e) {
    throw await attemptFailed(deps, attempt, event, e, waiting, token);
  }
}

/** Start timing the attempt, in BullMQ's process span (tracing on). */
function beginAttempt(deps: CallbackProcessorDeps, job: CallbackJobOf): Attempt {
  const started = performance.now();
  const kind = job.name === 'payin' || job.name === 'payout' ? job.name : 'unknown';
  const span = activeSpan();
  return {
    job,
    kind,
    number: job.attemptsMade + 1,
    last: job.attemptsMade + 1 >= (job.opts.attempts ?? 1),
    span,
    finish(outcome) {
      span?.setAttribute('mcb.outcome', outcome);
      deps.metrics?.jobs.inc({ kind, outcome });
      deps.metrics?.jobDuration.observe({ kind, outcome }, (performance.now() - started) / 1000);
    },
  };
}

/** The job's event; a payload that is not one fails the job for good (JOB_PAYLOAD_INVALID). */
function parseJob(deps: CallbackProcessorDeps, attempt: Attempt): CallbackJob {
  const { job } = attempt;
  const parsed = callbackJobSchema.safeParse(job.data);
  if (!parsed.success) {
    attempt.finish('failed');
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    deps.logger.error({ jobId: job.id, jobName: job.name }, `invalid job payload: ${issues}`);
    throw giveUp(new AppError(ErrorCodes.JOB_PAYLOAD_INVALID, issues));
  }
  const ids = { 'mcb.job_id': job.id ?? '', 'mcb.attempt': attempt.number };
  attempt.span?.setAttributes({ ...orderAttributes(parsed.data), ...ids });
  return parsed.data;
}

/**
 * When the event was first seen: the earlier of its `receivedAt` and the job's creation, so the waiting bounds hold
 * across restarts and retries.
 */
function firstSeenAt(job: Job, receivedAt: string): number {
  const received = Date.parse(receivedAt);
  return Number.isNaN(received) ? job.timestamp : Math.min(received, job.timestamp);
}

/**
 * The spec's handling order ({@link applyEvent}: confirm with Get order, verify, commit once), with the unknown-order
 * cap: past it, an event whose order is still unknown is decided now (review) instead of waiting in Redis.
 */
async function confirmAndSettle(
  deps: CallbackProcessorDeps,
  attempt: Attempt,
  event: CallbackJob,
  signal?: AbortSignal,
): Promise<ApplyOutcome> {
  const { job } = attempt;
  const options: ApplyOptions = {
    firstSeenAt: firstSeenAt(job, event.receivedAt),
    jobId: job.id,
    signal,
    noWait: attempt.last,
    // A receipt this job's earlier attempt committed without hearing back is its own credit (not a duplicate).
    ...(job.attemptsMade > 0
      ? {
          wasInDoubt: (receiptId: number) =>
            noteSaysInDoubt(deps.connection, deps.queueKey(`${job.id}:logs`), receiptId),
        }
      : {}),
  };
  const outcome = await applyEvent(event, deps.applyDeps, options);
  const unknownOrder = outcome.status === 'deferred' && outcome.code === ErrorCodes.VERIFY_ORDER_UNKNOWN;
  if (unknownOrder && (await deps.unknownOrders.overCap(job.id!))) {
    deps.logger.warn(
      { jobId: job.id, orderNo: event.orderNo, maxUnknownWaiting: deps.unknownOrders.max },
      'too many events wait for unknown orders: this one goes to review now',
    );
    // The decision's own rule (decide.ts, unknownOrderCapFull), as the replay dry run asks it.
    return applyEvent(event, deps.applyDeps, { ...options, unknownOrderCapFull: true });
  }
  // It may have waited for its order before: no longer.
  if (outcome.status !== 'deferred' && job.attemptsMade > 0) await deps.unknownOrders.release(job.id!);
  return outcome;
}

/**
 * What a failed attempt throws: while the platform's breaker is open, the job is put back (no attempt used);
 * otherwise the error is noted, logged and rethrown, for a retry or a failure for good.
 */
async function attemptFailed(
  deps: CallbackProcessorDeps,
  attempt: Attempt,
  event: CallbackJob,
  thrown: unknown,
  waiting: boolean,
  token?: string,
): Promise<Error> {
  const err = toJobError(thrown);
  if (err instanceof AppError && err.code === ErrorCodes.PLATFORM_CIRCUIT_OPEN && token) {
    const waited = Date.now() - firstSeenAt(attempt.job, event.receivedAt);
    if (waited < deps.circuitWaitBoundMs) return putBackWhileCircuitOpen(deps, attempt, event, err, token);
  }
  return noteFailedAttempt(deps, attempt, event, err, thrown, waiting);
}

/**
 * The platform's breaker is open and stayed open for the guard's whole wait: an outage elsewhere, not this job's
 * failure. Put the job back as delayed without consuming an attempt (BullMQ's moveToDelayed skips the count), noted
 * on its timeline and counted as a retry, up to a bound from when it was first seen.
 */
async function putBackWhileCircuitOpen(
  deps: CallbackProcessorDeps,
  attempt: Attempt,
  event: CallbackJob,
  err: AppError,
  token: string,
): Promise<Error> {
  const { job, kind } = attempt;
  const code = err.code;
  attempt.finish('retry');
  deps.metrics?.retries.inc({ kind, code });
  deps.arrivals.settled(job, event, { status: 'waiting', code, detail: firstLineOf(err) });
  const detail = `${describeJobError(err)}; put back without using an attempt`;
  await noteOn(job, { event: 'attempt-waiting', attempt: attempt.number, code, detail });
  deps.logger.warn(
    { jobId: job.id, orderNo: event.orderNo, code },
    'Get order paused by the circuit breaker: job put back, no attempt used',
  );
  await job.moveToDelayed(Date.now() + Math.round(deps.circuitRedelayMs * (1 + Math.random() / 2)), token);
  return new DelayedError();
}

/** A job taken while its merchant is paused: back to delayed, no attempt used (promoted once the lane fetches again). */
async function putBackWhilePaused(job: CallbackJobOf, token: string): Promise<never> {
  await job.moveToDelayed(Date.now() + PAUSED_REDELAY_MS, token);
  throw new DelayedError();
}

/** How long a job taken while its merchant is paused is put back for, in ms (it waits in `delayed` for the resume). */
const PAUSED_REDELAY_MS = 1000;

/** A retry (transient, not the last attempt) or a failure for good: counted, noted on the job, logged. */
async function noteFailedAttempt(
  deps: CallbackProcessorDeps,
  attempt: Attempt,
  event: CallbackJob,
  err: Error,
  thrown: unknown,
  waiting: boolean,
): Promise<Error> {
  const { job, kind } = attempt;
  const transient = classifyError(err) === 'transient' && !attempt.last;
  const code = jobErrorCode(err);
  attempt.finish(transient ? 'retry' : 'failed');
  // A final failure is recorded by the 'failed' listener (job-end-listeners.ts), once the job is in the failed set.
  if (transient)
    deps.arrivals.settled(job, event, { status: waiting ? 'waiting' : 'retrying', code, detail: firstLineOf(err) });
  markFailed(attempt.span, err);
  if (transient) deps.metrics?.retries.inc({ kind, code });
  // The console's timeline of this callback: each attempt that did not settle it, with its code and why.
  const note = { event: waiting ? 'attempt-waiting' : 'attempt-failed', attempt: attempt.number, code } as const;
  await noteOn(job, { ...note, detail: describeJobError(err) });
  const ids = { jobId: job.id, orderNo: event.orderNo, state: event.state, merchantOrderNo: event.merchantOrderNo };
  const fields = { ...ids, attempt: attempt.number, code, err: coerceError(thrown) };
  if (transient) deps.logger.warn(fields, `attempt failed, will retry: ${err.message}`);
  else deps.logger.error(fields, `job failed for good (kept for replay): ${err.message}`);
  return err;
}

/** Add a note to the job's timeline; a note that cannot be written changes nothing about the job. */
async function noteOn(job: Job, note: Parameters<typeof jobNote>[0]): Promise<void> {
  await job.log(jobNote(note)).catch(() => 0);
}
