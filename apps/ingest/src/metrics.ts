import { Counter, Histogram, type Registry } from '@mcb/core/metrics';

/** The ingest's Prometheus metrics, registered in the registry it is given. */
export interface IngestMetrics {
  /** Callbacks by route and outcome (`success`, `refused`, `unavailable`, `rejected`) and, when refused, the code. */
  requests: Counter<'route' | 'outcome' | 'code'>;
  /** Time from request to reply, by route and outcome. */
  latency: Histogram<'route' | 'outcome'>;
  /** Adds that failed or timed out (Redis down or slow). */
  enqueueFailures: Counter;
  /** Callbacks opened by each key of the ring (0 is current; others mean the platform still uses an old key). */
  keyUsed: Counter<'key_index'>;
}

export function createIngestMetrics(registry: Registry): IngestMetrics {
  return {
    requests: new Counter({
      name: 'ingest_callbacks_total',
      help: 'Callback requests by route and outcome',
      labelNames: ['route', 'outcome', 'code'],
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'ingest_callback_duration_seconds',
      help: 'Callback request latency until the reply',
      labelNames: ['route', 'outcome'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    enqueueFailures: new Counter({
      name: 'ingest_enqueue_failures_total',
      help: 'Callback jobs that could not be stored durably',
      registers: [registry],
    }),
    keyUsed: new Counter({
      name: 'ingest_decrypt_key_total',
      help: 'Callbacks opened by each key of the ring (0 = current)',
      labelNames: ['key_index'],
      registers: [registry],
    }),
  };
}
