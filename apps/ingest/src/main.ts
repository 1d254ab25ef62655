/**
 * Ingest entry point: only wiring. With INGEST_WORKERS > 1 (0 = one per core) the primary runs the cluster
 * supervisor (supervisor.ts); each worker, or the single process, builds and serves the app.
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { Queue } from 'bullmq';
import { AggregatorRegistry } from 'prom-client';
import { loadConfig, type Config } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { createReleasers, type Releasers } from '@mcb/core/lifecycle';
import { createLogger, logFormatOf, type Logger } from '@mcb/core/logger';
import { createMetricsRegistry, registerQueueDepthGauge, startMetricsServer } from '@mcb/core/metrics';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis, redisTargetOf } from '@mcb/core/redis';
import { queueTelemetry, startTracing } from '@mcb/core/tracing';
import { buildApp } from './app.ts';
import { loadKeyRingFromConfig } from './startup.ts';
import { runSupervisor } from './supervisor.ts';

/** A stop that has not finished in-flight callbacks by then is cut short. */
const SHUTDOWN_GRACE_MS = 25_000;

async function runServer(config: Config, logger: Logger, clustered: boolean, releasers: Releasers): Promise<void> {
  // First: the queue takes BullMQ's telemetry when it is built; released last, after the spans it ends.
  const tracing = startTracing('mcb-ingest', { ...process.env, ...config });
  if (tracing) releasers.add('tracing', () => tracing.shutdown());
  const keyRing = loadKeyRingFromConfig(config);
  logger.info({ keys: keyRing.keys.map((k) => ({ id: k.id, bits: k.bits })) }, 'key ring loaded');
  const redis = createRedis(redisTargetOf(config), 'producer', { connectionName: 'ingest' });
  releasers.add('redis', () => redis.quit().catch(() => redis.disconnect()));
  const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: config.QUEUE_PREFIX, ...queueTelemetry() });
  releasers.add('queue', () => queue.close());
  const registry = createMetricsRegistry('ingest');
  // Queue depth by state, read at scrape time (max across cluster workers: they all read the same queue).
  registerQueueDepthGauge(registry, queue);
  if (clustered) {
    // Answer the supervisor's metrics requests from the first moment: its scrape waits for every worker, so a
    // worker that only listened after its (slow) start-up would make scrapes time out meanwhile.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([registry]);
  } else {
    const metricsServer = await startMetricsServer({ host: config.INGEST_METRICS_HOST, port: config.INGEST_METRICS_PORT, logger, source: registry });
    releasers.add('metrics server', () => metricsServer.close());
  }
  let shuttingDown = false;
  const app = await buildApp({ config, queue, redis, logger, keyRing, metricsRegistry: registry, isShuttingDown: () => shuttingDown });
  // Released first: readiness fails and new callbacks get 503 fail while the in-flight ones finish.
  releasers.add('http server', async () => {
    shuttingDown = true;
    await app.close();
  });
  await app.listen({ host: config.INGEST_HOST, port: config.INGEST_PORT });
  logger.info({ port: config.INGEST_PORT }, 'ingest listening');
}

const logger = createLogger({ name: 'ingest', format: logFormatOf(process.env) });
const releasers = createReleasers(logger, { stoppingMessage: 'shutting down: finishing in-flight callbacks', graceMs: SHUTDOWN_GRACE_MS });
try {
  const config = loadConfig(process.env, 'ingest');
  logger.level = config.LOG_LEVEL;
  const workers = config.INGEST_WORKERS === 0 ? availableParallelism() : config.INGEST_WORKERS;
  if (workers > 1 && cluster.isPrimary) await runSupervisor(config, logger, workers, releasers);
  else await runServer(config, logger, cluster.isWorker, releasers);
  releasers.onSignals();
} catch (e) {
  const err = coerceError(e);
  logger.fatal({ err, code: (err as { code?: string }).code }, 'ingest refused to start');
  console.error(`ingest: ${err.message}`);
  await releasers.shutdown('startup-failure', 1);
}
