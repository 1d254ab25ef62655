import { Counter, Gauge, Histogram, type Registry } from '@mcb/core/metrics';
import { ErrorCodes } from '@mcb/core/errors';
import { CALLBACK_KINDS } from '@mcb/core/spec';
import { commitWaits, type SettlementMetrics } from '@mcb/settlement';
import type pg from 'pg';

/** The worker's Prometheus metrics: outcomes, durations, retries, reviews and Get order latency. */
export interface WorkerMetrics extends SettlementMetrics {
  /** Jobs finished, by kind and outcome (credited, succeeded, refused, duplicate, review, retry, failed). */
  jobs: Counter<'kind' | 'outcome'>;
  /** Time spent on one attempt, by kind and outcome. */
  jobDuration: Histogram<'kind' | 'outcome'>;
  /** Events per batch of the group commit and of the look-ups before Get order. */
  batchSize: Histogram<'batch'>;
  /** BullMQ commands Redis refused for lack of memory (the worker pauses fetching with a backoff). */
  redisOom: Counter;
  /** Current pause of job fetching after an OOM, in seconds (0 when fetching normally). */
  redisOomBackoff: Gauge;
  /** Attempts that will be retried, by kind and reason code. */
  retries: Counter<'kind' | 'code'>;
  /** Reviews opened (or re-seen), by kind and reason code. */
  reviews: Counter<'kind' | 'code'>;
  /** Get order round trips, by result (ok or the error code). */
  getOrderDuration: Histogram<'result'>;
  /** PayTime to the credit's commit, by kind (the SLO alert PaymentToCreditSlow reads it). */
  paymentToCredit: Histogram<'kind'>;
  /** From the callback's arrival at ingest to the credit's commit, by kind (the sweep's credits are not counted). */
  callbackToCredit: Histogram<'kind'>;
  /** Callbacks whose content differs from what was applied for their pair or order (VERIFY_DIFFERS_FROM_APPLIED). */
  suspectedForgeries: Counter<'kind' | 'against'>;
  /** Jobs this process may run at once: the adaptive limit, or WORKER_CONCURRENCY when fixed. */
  inFlightLimit: Gauge;
  /** Jobs running now. */
  inFlight: Gauge;
  /** 1 while the platform circuit breaker is open or probing (Get order paused after repeated failures), else 0. */
  platformCircuitOpen: Gauge;
}

/** Reasons a callback event goes to review (verification failures, and the platform refusing to confirm). */
const REVIEW_CODES = [
  ...Object.values(ErrorCodes).filter((c) => c.startsWith('VERIFY_')),
  ErrorCodes.PLATFORM_ERROR_CODE,
  ErrorCodes.PLATFORM_HTTP_ERROR,
];

/** Job outcomes the callback worker counts (`mcb_worker_jobs_total{outcome}`). */
export const JOB_OUTCOMES = ['credited', 'succeeded', 'refused', 'duplicate', 'review', 'retry', 'failed'] as const;

/**
 * Create and register the worker's metrics on `registry`. Every (kind, outcome) series of the job counter exists
 * (and every (kind, review reason) of the review counter) from the start at 0: Prometheus's `increase()` cannot see
 * a counter's first increment when its series appears already at 1, so without this the first exhausted job of a
 * process would never fire `CallbackJobExhausted`.
 */
export function createWorkerMetrics(registry: Registry): WorkerMetrics {
  const metrics = buildWorkerMetrics(registry);
  for (const kind of CALLBACK_KINDS) {
    for (const outcome of JOB_OUTCOMES) metrics.jobs.inc({ kind, outcome }, 0);
    for (const code of REVIEW_CODES) metrics.reviews.inc({ kind, code }, 0);
    for (const against of ['receipt', 'order']) metrics.suspectedForgeries.inc({ kind, against }, 0);
  }
  return metrics;
}

function buildWorkerMetrics(registry: Registry): WorkerMetrics {
  const registers = [registry];
  return {
    jobs: new Counter({
      name: 'mcb_worker_jobs_total',
      help: 'Callback job attempts by outcome',
      labelNames: ['kind', 'outcome'],
      registers,
    }),
    jobDuration: new Histogram({
      name: 'mcb_worker_job_duration_seconds',
      help: 'Duration of one callback job attempt',
      labelNames: ['kind', 'outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    batchSize: new Histogram({
      name: 'mcb_worker_batch_size',
      help: 'Events per group-commit transaction (batch="commit") and per look-up statement (batch="lookup")',
      labelNames: ['batch'],
      buckets: [1, 2, 4, 8, 16, 32, 64, 128],
      registers,
    }),
    redisOom: new Counter({
      name: 'mcb_worker_redis_oom_total',
      help: 'Redis commands refused with OOM (maxmemory reached)',
      registers,
    }),
    redisOomBackoff: new Gauge({
      name: 'mcb_worker_redis_oom_backoff_seconds',
      help: 'Current pause of job fetching after Redis refused a command with OOM (0 when fetching normally)',
      registers,
    }),
    retries: new Counter({
      name: 'mcb_worker_retries_total',
      help: 'Callback job attempts that will be retried',
      labelNames: ['kind', 'code'],
      registers,
    }),
    reviews: new Counter({
      name: 'mcb_worker_reviews_total',
      help: 'Events sent to review',
      labelNames: ['kind', 'code'],
      registers,
    }),
    getOrderDuration: new Histogram({
      name: 'mcb_worker_get_order_duration_seconds',
      help: 'Duration of Get order calls',
      labelNames: ['result'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    paymentToCredit: new Histogram({
      name: 'mcb_payment_to_credit_seconds',
      help:
        "From the record's PayTime (UTC+8, as an instant) to the commit of its credit or payout outcome, by kind; " +
        'a PayTime before the order was created or after the callback arrived (5 min of skew) is not measured',
      labelNames: ['kind'],
      // The SLO (PaymentToCreditSlow) is read at 300 s: keep that bound.
      buckets: [1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400],
      registers,
    }),
    callbackToCredit: new Histogram({
      name: 'mcb_callback_to_credit_seconds',
      help: "From the callback's arrival at ingest to the commit of its credit or payout outcome, by kind",
      labelNames: ['kind'],
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
      registers,
    }),
    suspectedForgeries: new Counter({
      name: 'mcb_worker_suspected_forgeries_total',
      help:
        'Callbacks for an applied pair (against="receipt") or an already-final order (against="order") ' +
        'whose content differs from what was applied',
      labelNames: ['kind', 'against'],
      registers,
    }),
    inFlightLimit: new Gauge({
      name: 'mcb_worker_in_flight_limit',
      help: 'Jobs this worker process may run at once (adaptive, or WORKER_CONCURRENCY)',
      registers,
    }),
    inFlight: new Gauge({ name: 'mcb_worker_in_flight', help: 'Jobs this worker process is running now', registers }),
    platformCircuitOpen: new Gauge({
      name: 'mcb_worker_platform_circuit_open',
      help: '1 while Get order is paused by the circuit breaker after repeated platform failures (open or probing), else 0',
      registers,
    }),
  };
}

/** A COMMIT in flight longer than this is counted as stalled (`mcb_worker_commits_stalled`), in ms. */
export const STALLED_COMMIT_MS = 5000;

/**
 * Gauges of the COMMITs in flight on `pool`, read at scrape time: how many have waited longer than
 * {@link STALLED_COMMIT_MS}, and how long the oldest has. A COMMIT that waits is most often a synchronous standby
 * gone (Postgres waits for it without end; statement_timeout does not apply): alert PostgresCommitsStalled.
 */
export function registerCommitWaitGauges(registry: Registry, pool: pg.Pool, thresholdMs = STALLED_COMMIT_MS): void {
  const registers = [registry];
  new Gauge({
    name: 'mcb_worker_commits_stalled',
    help: `COMMITs in flight for longer than ${thresholdMs / 1000} s (a synchronous standby gone, or a stalled disk)`,
    registers,
    collect() {
      this.set(commitWaits(pool, thresholdMs).stalled);
    },
  });
  new Gauge({
    name: 'mcb_worker_commit_wait_seconds',
    help: 'How long the oldest COMMIT in flight has waited so far (0 when none is in flight)',
    registers,
    collect() {
      this.set(commitWaits(pool, thresholdMs).oldestMs / 1000);
    },
  });
}
