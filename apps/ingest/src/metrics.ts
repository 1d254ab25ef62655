import { Counter, Gauge, Histogram, type Registry } from '@mcb/core/metrics';

/** The ingest's Prometheus metrics, registered in the registry it is given. */
export interface IngestMetrics {
  /**
   * Callbacks by route (its pattern, never a ref as sent) and outcome (`success`, `refused`, `unavailable`,
   * `rejected`) and, when refused, the code. This and the next three carry `merchant`: a configured ref (`default`
   * without MERCHANTS_FILE), or `_unknown` for a route no merchant serves (docs/merchants.md).
   */
  requests: Counter<'route' | 'outcome' | 'code' | 'merchant'>;
  /** Time from request to reply, by route and outcome (and merchant). */
  latency: Histogram<'route' | 'outcome' | 'merchant'>;
  /** Adds that failed or timed out (Redis down or slow), or that the Redis gate refused (and merchant). */
  enqueueFailures: Counter<'merchant'>;
  /** Callbacks opened by each key of the merchant's ring (0 is current; others: the platform still uses an old key). */
  keyUsed: Counter<'key_index' | 'merchant'>;
  /** Callbacks stored per batch (one addBulk and one WAITAOF each). */
  enqueueBatchSize: Histogram;
  /** Free share of Redis maxmemory as last measured (1 when Redis has no limit). */
  redisHeadroom: Gauge;
  /**
   * Connections refused or cut by a listener bound: refused when they open (`source_not_allowed`, `address_limit`,
   * `max_connections`), cut later (`body_timeout`, `request_timeout`: 408; `idle`; `client_error`: 400/431).
   */
  connectionsCut: Counter<'reason'>;
  /** Connections admitted (past the allowlist and the per-address and global caps). */
  connectionsAdmitted: Counter;
  /** Connections admitted and still open. */
  connectionsOpen: Gauge;
  /** The connection cap this process runs with (INGEST_MAX_CONNECTIONS, sized at start when `auto`). */
  connectionsMax: Gauge;
  /**
   * Callbacks of a paused merchant answered `503 fail` because its backlog reached MERCHANT_PAUSED_MAX_BACKLOG, by
   * merchant (a configured ref, `default` without MERCHANTS_FILE).
   */
  pausedBacklogRefusals: Counter<'merchant'>;
}

export function createIngestMetrics(registry: Registry): IngestMetrics {
  return {
    requests: new Counter({
      name: 'ingest_callbacks_total',
      help: 'Callback requests by route and outcome',
      labelNames: ['route', 'outcome', 'code', 'merchant'],
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'ingest_callback_duration_seconds',
      help: 'Callback request latency until the reply',
      labelNames: ['route', 'outcome', 'merchant'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    enqueueFailures: new Counter({
      name: 'ingest_enqueue_failures_total',
      help: 'Callback jobs that could not be stored durably',
      labelNames: ['merchant'],
      registers: [registry],
    }),
    keyUsed: new Counter({
      name: 'ingest_decrypt_key_total',
      help: 'Callbacks opened by each key of the ring (0 = current)',
      labelNames: ['key_index', 'merchant'],
      registers: [registry],
    }),
    redisHeadroom: new Gauge({
      name: 'ingest_redis_memory_headroom_ratio',
      help: 'Free share of Redis maxmemory (1 = no limit); ingest refuses callbacks below INGEST_REDIS_MIN_HEADROOM',
      registers: [registry],
    }),
    connectionsCut: new Counter({
      name: 'ingest_connections_cut_total',
      help:
        'Connections refused or cut by a listener bound (reason: source_not_allowed, address_limit, ' +
        'max_connections, body_timeout, request_timeout, idle, client_error)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    connectionsAdmitted: new Counter({
      name: 'ingest_connections_admitted_total',
      help: 'Connections to the public listener admitted (past the allowlist and the connection caps)',
      registers: [registry],
    }),
    connectionsOpen: new Gauge({
      name: 'ingest_connections_open',
      help: 'Connections to the public listener admitted and still open',
      registers: [registry],
    }),
    connectionsMax: new Gauge({
      name: 'ingest_connections_max',
      help: 'The connection cap of the public listener (INGEST_MAX_CONNECTIONS; sized at start when auto)',
      registers: [registry],
    }),
    pausedBacklogRefusals: new Counter({
      name: 'ingest_paused_backlog_refusals_total',
      help: 'Callbacks of a paused merchant refused (503 fail): its backlog reached MERCHANT_PAUSED_MAX_BACKLOG',
      labelNames: ['merchant'],
      registers: [registry],
    }),
    enqueueBatchSize: new Histogram({
      name: 'ingest_enqueue_batch_size',
      help: 'Callbacks stored per batch (one addBulk and one WAITAOF)',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers: [registry],
    }),
  };
}
