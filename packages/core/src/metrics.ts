import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';
export {
  startMetricsServer,
  type MetricsServer,
  type MetricsServerOptions,
  type MetricsSource,
} from './metrics-server.ts';

/** A fresh prom-client registry with the process's default metrics, labelled with the app's name. */
export function createMetricsRegistry(app: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ app });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/**
 * The value of `name` in a Prometheus text exposition (a /metrics body): the sum over its series whose labels include
 * every one of `labels` (all of them when none is given); 0 when there is none. For tests, the bench and tools that
 * read another process's metrics.
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    if (Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

/** The queue states reported by {@link registerQueueDepthGauge}. */
export const QUEUE_DEPTH_STATES = [
  'waiting',
  'active',
  'delayed',
  'prioritized',
  'waiting-children',
  'failed',
  'completed',
  'paused',
] as const;

/** What {@link registerQueueDepthGauge} needs of a queue (a BullMQ Queue has it). */
export interface QueueDepthSource {
  readonly name: string;
  getJobCounts(...types: string[]): Promise<Record<string, number>>;
}

/** Options of {@link registerQueueDepthGauge}. */
export interface QueueDepthOptions {
  /** How long one read of the depths may take before the depth series are left out, in ms. @defaultValue 2000 */
  readTimeoutMs?: number;
  /**
   * The `merchant` label of a queue's series (its merchant's configured ref); undefined: none set here (the worker's
   * lane registries set it as a default label). @defaultValue none
   */
  merchantOf?: (queue: QueueDepthSource) => string;
}

/**
 * `mcb_queue_jobs{queue,state,merchant}`: jobs per state, read from Redis when Prometheus scrapes (one getJobCounts
 * per queue), plus `mcb_queue_depth_up{queue,merchant}` (0 when Redis did not answer; the depth series are then
 * absent rather than stale; also when the read takes over `readTimeoutMs`, 2 s by default). Aggregated with `max`
 * across cluster workers, which all read the same queue.
 */
export function registerQueueDepthGauge(
  registry: Registry,
  queues: QueueDepthSource | QueueDepthSource[],
  options: QueueDepthOptions = {},
): void {
  const list = Array.isArray(queues) ? queues : [queues];
  // A worker's connection queues commands while Redis is down (BullMQ needs it to): without a bound, a scrape would
  // wait for Redis and time out, and every other metric (mcb_redis_down_since_seconds among them) with it.
  const readTimeoutMs = options.readTimeoutMs ?? 2000;
  const bounded = <T>(p: Promise<T>): Promise<T | undefined> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), readTimeoutMs)));
    return Promise.race([p.catch(() => undefined), timeout]).finally(() => clearTimeout(timer));
  };
  // prom-client collects metrics concurrently: both gauges share one read per scrape.
  const merchantOf = options.merchantOf;
  let pending:
    | Promise<{ name: string; merchant: { merchant?: string }; counts: Record<string, number> | undefined }[]>
    | undefined;
  const read = () => {
    pending ??= Promise.all(
      list.map(async (queue) => ({
        name: queue.name,
        merchant: merchantOf ? { merchant: merchantOf(queue) } : {},
        counts: await bounded(queue.getJobCounts(...QUEUE_DEPTH_STATES)),
      })),
    ).finally(() => {
      pending = undefined;
    });
    return pending;
  };
  new Gauge({
    name: 'mcb_queue_jobs',
    help: 'Jobs in the queue by state, read at scrape time',
    labelNames: ['queue', 'state', 'merchant'],
    registers: [registry],
    aggregator: 'max',
    async collect() {
      const results = await read();
      this.reset();
      for (const { name, merchant, counts } of results) {
        if (counts)
          for (const state of QUEUE_DEPTH_STATES) this.set({ queue: name, state, ...merchant }, counts[state] ?? 0);
      }
    },
  });
  new Gauge({
    name: 'mcb_queue_depth_up',
    help: 'Whether the last read of queue depth from Redis succeeded (1) or not (0)',
    labelNames: ['queue', 'merchant'],
    registers: [registry],
    aggregator: 'max',
    async collect() {
      for (const { name, merchant, counts } of await read()) this.set({ queue: name, ...merchant }, counts ? 1 : 0);
    },
  });
}
