import { coerceError } from '@mcb/core/errors';
import { createLogThrottle } from '@mcb/core/logger';
import type { RedisClient, RedisHealth } from '@mcb/core/redis';
import { queueTelemetry } from '@mcb/core/tracing';
import type { Merchant } from '@mcb/core/config';
import { CALLBACK_BACKOFF, type CallbackJobInput, merchantKeys, type MerchantKeys } from '@mcb/core/queue';
import { Queue, Worker } from 'bullmq';
import {
  callbackBackoffDelay,
  createSettlementBatchers,
  type ApplyDeps,
  type ApplyOutcome,
  type BackoffOptions,
} from '@mcb/settlement';
import { alertOnReviewOpened, type Alerter } from './alerts.ts';
import type { AdaptiveLimit } from './adaptive-concurrency.ts';
import { retuneFetchLoops } from './adaptive-retune.ts';
import { createArrivalRecorder, WORKER_ARRIVAL_WAITS, type ArrivalRecorder } from './arrival-recorder.ts';
import { createCallbackProcessor } from './callback-processor.ts';
import { startFailedRowsCheck } from './failed-rows-check.ts';
import { groupFetchLoops, shareOf, type FetchLoopGroup } from './fetch-loops.ts';
import { alertFinalFailure, recordFinalFailure, releaseReviewedJobId } from './job-end-listeners.ts';
import type { WorkerMetrics } from './metrics.ts';
import { createRedisOomPause } from './redis-oom-pause.ts';
import { createUnknownOrderCap } from './unknown-order-cap.ts';

/** The holder name of a merchant's pause on its callback worker's fetch loops (fetch-loops.ts). */
export const MERCHANT_PAUSED_HOLDER = 'merchant-paused';

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
  /** BullMQ key prefix (QUEUE_PREFIX); the merchant's keys are named under it (`merchantKeys`). @defaultValue 'mcb' */
  prefix?: string;
  /**
   * The lane's merchant: its callbacks queue and unknown-order set (`merchantKeys(prefix, ref)`), and the one merchant
   * number whose jobs this worker may settle (see `checkMerchantNo`). @defaultValue the `default` merchant's queue
   */
  merchant?: Pick<Merchant, 'ref' | 'merchantNo'>;
  /**
   * Settle only jobs carrying `merchant.merchantNo`; any other goes to review unsettled (misrouted-job.ts).
   * @defaultValue true when `merchant` is given
   */
  checkMerchantNo?: boolean;
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
   * A cap on the jobs in flight the adaptive limit allows, read at each retune: the process's lane governor holding
   * a lane that takes more than its share while lanes compete (lane-governor.ts). @defaultValue none
   */
  cap?: () => number;
  /**
   * BullMQ Workers in this process that share the jobs in flight (fetch-loops.ts: a Worker starts none of the jobs
   * it fetches until its free slots are full, so one Worker with many free slots processes nothing while it fills
   * them one fetch at a time). @defaultValue 4 with `adaptive`, else 1
   */
  fetchLoops?: number;
  /**
   * The limit from which every fetch loop fetches: below it the loops beyond the first are parked (fetch-loops.ts).
   * @defaultValue ALL_LOOPS_FROM (256)
   */
  allLoopsFrom?: number;
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
  /**
   * Job lock, in ms; a job whose lock lapses (its worker died) is run again. Keep it above PLATFORM_TIMEOUT.
   * @defaultValue 30000
   */
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
  /**
   * Told when a job fails for good and when a review is opened (not when an open one is seen again).
   * @defaultValue none
   */
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
  /**
   * How often BullMQ's failed set is compared with the console's rows, in ms (failed-rows-check.ts): a failed job
   * whose `failed` row is missing gets it. The first check runs when the worker starts. 0 turns it off.
   * @defaultValue 60000
   */
  failedRowsCheckMs?: number;
  /**
   * The lane's merchant was paused when the worker started (merchant_pauses, read before any job is taken): its loops
   * are built held, and fetch nothing until `resume('merchant-paused')` (merchant-pause.ts). @defaultValue false
   */
  startPaused?: boolean;
}

/**
 * The callbacks queue's worker: its fetch loops (BullMQ Workers) owned as one, with their events, pause and close.
 * `close()` waits for the jobs in progress (graceful shutdown), then for the last rows of the console's search.
 */
export type CallbackWorker = FetchLoopGroup<CallbackJobInput, ApplyOutcome>;

/**
 * The callbacks queue's worker: BullMQ Workers on CALLBACKS_QUEUE running the callback processor
 * (callback-processor.ts: {@link applyEvent} with its retry policy), the CALLBACK_BACKOFF strategy registered, and
 * beside them the unknown-order cap, the pause while Redis is out of memory, the adaptive limit's retune and the
 * listeners of jobs that end (the search's last row, the alert, a reviewed job's id released).
 */
export function createCallbackWorker(deps: CallbackWorkerDeps): CallbackWorker {
  const { metrics, logger, adaptive } = deps;
  const keys = keysOf(deps);
  const arrivals = deps.arrivals ?? createArrivalRecorder(deps.db, logger, WORKER_ARRIVAL_WAITS);
  const processor = createCallbackProcessor({
    applyDeps: settlementDeps(deps),
    arrivals,
    unknownOrders: createUnknownOrderCap({
      connection: deps.connection,
      key: keys.unknownOrderWaiting,
      max: deps.maxUnknownWaiting ?? 10_000,
      graceMs: deps.orderGracePeriodMs ?? 15 * 60_000,
    }),
    connection: deps.connection,
    queueKey: (type) => loops.fetchLoops[0]!.toKey(type),
    logger,
    metrics,
    adaptive,
    merchantNo: (deps.checkMerchantNo ?? true) ? deps.merchant?.merchantNo : undefined,
    circuitRedelayMs: deps.circuitRedelayMs ?? 5000,
    circuitWaitBoundMs: deps.circuitWaitBoundMs ?? 24 * 3600_000,
    paused: () => loops.held(MERCHANT_PAUSED_HOLDER),
  });
  const count = Math.max(1, Math.floor(deps.fetchLoops ?? (adaptive ? 4 : 1)));
  const allowed = adaptive?.limit ?? deps.concurrency ?? 256;
  const loop = (i: number) =>
    new Worker(keys.callbacksQueue, processor, workerOptions(deps, keys, shareOf(allowed, count, i)));
  const loops = groupFetchLoops([loop(0), ...Array.from({ length: count - 1 }, (_, i) => loop(i + 1))]);
  // Held before the first fetch: a loop built without autorun starts only when the pause lets go (BullMQ's resume
  // runs a worker that never ran).
  if (deps.startPaused) void loops.pause(true, MERCHANT_PAUSED_HOLDER);

  const oomPause = createRedisOomPause({ fetching: loops, logger, metrics });
  loops.on('error', reportErrors(deps, oomPause.refused));
  loops.on('completed', oomPause.completed);
  metrics?.inFlightLimit.set(allowed);
  const stopRetune = adaptive && retuneFetchLoops(loops, adaptive, metrics, deps.allLoopsFrom, deps.cap);
  if (deps.releaseReviewedJobIds ?? true) loops.on('completed', releaseReviewedJobId(logger));
  loops.on('failed', recordFinalFailure(arrivals));
  loops.on('stalled', (jobId) => logger.warn({ jobId }, 'job stalled (its worker died or hung); it runs again'));
  if (deps.alerts) loops.on('failed', alertFinalFailure(deps.alerts, keys.callbacksQueue));
  const failedRows = startFailedRows(deps, keys, arrivals);
  return {
    ...loops,
    async close(force) {
      oomPause.stop();
      stopRetune?.();
      await failedRows?.stop();
      await loops.close(force);
      // The last attempts' rows are written before close() resolves (and the caller closes the pool).
      await arrivals.flush();
    },
  };
}

/** The failed-rows check on its own queue handle (closed with it), unless `failedRowsCheckMs` is 0. */
function startFailedRows(deps: CallbackWorkerDeps, keys: MerchantKeys, arrivals: ArrivalRecorder) {
  const everyMs = deps.failedRowsCheckMs ?? 60_000;
  if (everyMs <= 0 || deps.autorun === false) return undefined;
  const queue = new Queue(keys.callbacksQueue, { connection: deps.connection, prefix: keys.prefix });
  queue.on(
    'error',
    reportErrors(deps, () => false),
  );
  const check = startFailedRowsCheck({
    db: deps.db,
    queue,
    merchantNo: deps.merchant?.merchantNo,
    arrivals,
    logger: deps.logger,
    everyMs,
  });
  return {
    async stop() {
      await check.stop();
      await queue.close();
    },
  };
}

/** The money path's dependencies: the group-commit batchers and the review alert unless given. */
function settlementDeps(deps: CallbackWorkerDeps): ApplyDeps {
  const { metrics } = deps;
  return {
    ...deps,
    batchers:
      deps.batchers ??
      createSettlementBatchers(deps.db, {
        maxCommitBatch: deps.commitBatch,
        onBatch: metrics && ((batch, size) => metrics.batchSize.observe({ batch }, size)),
      }),
    ...(deps.alerts && !deps.onReviewOpened ? { onReviewOpened: alertOnReviewOpened(deps.alerts) } : {}),
  };
}

/** The merchant's keys under the worker's prefix (the `default` merchant's when none is given). */
function keysOf(deps: CallbackWorkerDeps): MerchantKeys {
  return merchantKeys(deps.prefix ?? 'mcb', deps.merchant?.ref);
}

/** The BullMQ options of one fetch loop, `concurrency` its share of the jobs in flight. */
function workerOptions(deps: CallbackWorkerDeps, keys: MerchantKeys, concurrency: number) {
  const { logger } = deps;
  return {
    connection: deps.connection,
    prefix: keys.prefix,
    name: deps.name,
    concurrency,
    autorun: (deps.autorun ?? true) && !deps.startPaused,
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
  };
}

/**
 * The worker's 'error' listener: an 'error' without one would crash the process (BullMQ reconnects on its own). An
 * OOM refusal pauses fetching (redis-oom-pause.ts); any other error goes to the Redis health, or is logged here at
 * most once per 10 s.
 */
function reportErrors(deps: CallbackWorkerDeps, oomRefused: (e: Error) => boolean): (e: Error) => void {
  const logThrottled = createLogThrottle(deps.logger);
  return (e) => {
    if (oomRefused(e)) return;
    if (deps.redisHealth) return deps.redisHealth.report('callback worker', e);
    logThrottled('callback worker', 'error', { err: coerceError(e) }, 'callback worker error');
  };
}
