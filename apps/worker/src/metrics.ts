import { Counter, Gauge, Histogram, type Registry } from '@mcb/core/metrics';
import type { SettlementMetrics } from '@mcb/settlement';

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
}

/** Create and register the worker's metrics on `registry`. */
export function createWorkerMetrics(registry: Registry): WorkerMetrics {
  const registers = [registry];
  return {
    jobs: new Counter({ name: 'mcb_worker_jobs_total', help: 'Callback job attempts by outcome', labelNames: ['kind', 'outcome'], registers }),
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
    redisOom: new Counter({ name: 'mcb_worker_redis_oom_total', help: 'Redis commands refused with OOM (maxmemory reached)', registers }),
    redisOomBackoff: new Gauge({
      name: 'mcb_worker_redis_oom_backoff_seconds',
      help: 'Current pause of job fetching after Redis refused a command with OOM (0 when fetching normally)',
      registers,
    }),
    retries: new Counter({ name: 'mcb_worker_retries_total', help: 'Callback job attempts that will be retried', labelNames: ['kind', 'code'], registers }),
    reviews: new Counter({ name: 'mcb_worker_reviews_total', help: 'Events sent to review', labelNames: ['kind', 'code'], registers }),
    getOrderDuration: new Histogram({
      name: 'mcb_worker_get_order_duration_seconds',
      help: 'Duration of Get order calls',
      labelNames: ['result'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
  };
}
