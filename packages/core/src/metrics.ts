import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';
export { startMetricsServer, type MetricsServer, type MetricsServerOptions, type MetricsSource } from './metrics-server.ts';

/** A fresh prom-client registry with the process's default metrics, labelled with the app's name. */
export function createMetricsRegistry(app: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ app });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** The queue states reported by {@link registerQueueDepthGauge}. */
export const QUEUE_DEPTH_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'failed', 'completed', 'paused'] as const;

/** What {@link registerQueueDepthGauge} needs of a queue (a BullMQ Queue has it). */
export interface QueueDepthSource {
  readonly name: string;
  getJobCounts(...types: string[]): Promise<Record<string, number>>;
}

/**
 * `mcb_queue_jobs{queue,state}`: jobs per state, read from Redis when Prometheus scrapes (one getJobCounts per
 * queue), plus `mcb_queue_depth_up{queue}` (0 when Redis did not answer; the depth series are then absent rather
 * than stale). Aggregated with `max` across cluster workers, which all read the same queue.
 */
export function registerQueueDepthGauge(registry: Registry, queues: QueueDepthSource | QueueDepthSource[]): void {
  const list = Array.isArray(queues) ? queues : [queues];
  // prom-client collects metrics concurrently: both gauges share one read per scrape.
  let pending: Promise<{ name: string; counts: Record<string, number> | undefined }[]> | undefined;
  const read = () => {
    pending ??= Promise.all(
      list.map(async (queue) => ({ name: queue.name, counts: await queue.getJobCounts(...QUEUE_DEPTH_STATES).catch(() => undefined) })),
    ).finally(() => {
      pending = undefined;
    });
    return pending;
  };
  new Gauge({
    name: 'mcb_queue_jobs',
    help: 'Jobs in the queue by state, read at scrape time',
    labelNames: ['queue', 'state'],
    registers: [registry],
    aggregator: 'max',
    async collect() {
      const results = await read();
      this.reset();
      for (const { name, counts } of results) {
        if (counts) for (const state of QUEUE_DEPTH_STATES) this.set({ queue: name, state }, counts[state] ?? 0);
      }
    },
  });
  new Gauge({
    name: 'mcb_queue_depth_up',
    help: 'Whether the last read of queue depth from Redis succeeded (1) or not (0)',
    labelNames: ['queue'],
    registers: [registry],
    aggregator: 'max',
    async collect() {
      for (const { name, counts } of await read()) this.set({ queue: name }, counts ? 1 : 0);
    },
  });
}
