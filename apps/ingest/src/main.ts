/**
 * Ingest entry point: only wiring. With INGEST_WORKERS > 1 (0 = one per core) the primary runs the cluster
 * supervisor (supervisor.ts); each worker, or the single process, builds and serves the app.
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { AggregatorRegistry } from 'prom-client';
import { prepareDecryption } from '@mcb/core/callback';
import { loadConfig, type Config } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { createReleasers, type Releasers } from '@mcb/core/lifecycle';
import { createLogger, logFormatOf, type Logger } from '@mcb/core/logger';
import { createMetricsRegistry, registerQueueDepthGauge, startMetricsServer } from '@mcb/core/metrics';
import { createRedis, createRedisHealth, redisTargetOf } from '@mcb/core/redis';
import { queueTelemetry, startTracing } from '@mcb/core/tracing';
import { buildApp } from './app.ts';
import { closeLanes, openLanes } from './lanes.ts';
import { loadKeyRingsFromConfig } from './startup.ts';
import { runSupervisor } from './supervisor.ts';

async function runServer(config: Config, logger: Logger, clustered: boolean, releasers: Releasers): Promise<void> {
  // First: the queue takes BullMQ's telemetry when it is built; released last, after the spans it ends.
  const tracing = startTracing('mcb-ingest', { ...process.env, ...config });
  if (tracing) releasers.add('tracing', () => tracing.shutdown());
  const rings = loadKeyRingsFromConfig(config);
  for (const [merchant, ring] of rings) {
    // Each key's decryption call is chosen (and checked) now, not on its first callback; the line says which.
    const rsaCalls = prepareDecryption(ring.keys);
    logger.info(
      { merchant, keys: ring.keys.map((k, i) => ({ id: k.id, bits: k.bits, rsaCall: rsaCalls[i] })) },
      'key ring loaded',
    );
  }
  const registry = createMetricsRegistry('ingest');
  const redis = createRedis(redisTargetOf(config), 'producer', { connectionName: 'ingest' });
  // The gauges (mcb_redis_up, mcb_redis_down_since_seconds). The app logs the connection's errors once it is built;
  // the queue is listened to from its first moment (during the app's start-up, and after it closes, BullMQ would
  // write its errors raw to stderr), its copies of connection errors only counted while the connection is down.
  const redisHealth = createRedisHealth({ logger, registry });
  redisHealth.watch(redis, 'ingest', { logErrors: false });
  releasers.add(
    'redis',
    () => redis.quit().catch(() => redis.disconnect()),
    () => redis.disconnect(),
  );
  // One queue per merchant, all on the one producer connection.
  const lanes = openLanes(config, redis, rings, queueTelemetry());
  for (const { queue, merchant } of lanes)
    redisHealth.listen(queue, lanes.length === 1 ? 'callbacks queue' : `callbacks queue (merchant ${merchant.ref})`);
  releasers.add('queue', () => closeLanes(lanes));
  // Queue depth by state, read at scrape time (max across cluster workers: they all read the same queues).
  const refOf = new Map<unknown, string>(lanes.map((l) => [l.queue, l.merchant.ref]));
  registerQueueDepthGauge(
    registry,
    lanes.map((l) => l.queue),
    { merchantOf: (q) => refOf.get(q)! },
  );
  if (clustered) {
    // Answer the supervisor's metrics requests from the first moment: its scrape waits for every worker, so a
    // worker that only listened after its (slow) start-up would make scrapes time out meanwhile.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([registry]);
  } else {
    const metricsServer = await startMetricsServer({
      host: config.INGEST_METRICS_HOST,
      port: config.INGEST_METRICS_PORT,
      logger,
      source: registry,
    });
    releasers.add('metrics server', () => metricsServer.close());
  }
  let shuttingDown = false;
  const app = await buildApp({
    config,
    lanes,
    redis,
    logger,
    metricsRegistry: registry,
    isShuttingDown: () => shuttingDown,
  });
  // Released first: readiness fails and new callbacks get 503 fail while the in-flight ones finish.
  releasers.add('http server', async () => {
    shuttingDown = true;
    await app.close();
  });
  await app.listen({ host: config.INGEST_HOST, port: config.INGEST_PORT });
  logger.info({ port: config.INGEST_PORT }, 'ingest listening');
}

const logger = createLogger({ name: 'ingest', format: logFormatOf(process.env) });
const releasers = createReleasers(logger, { stoppingMessage: 'shutting down: finishing in-flight callbacks' });
try {
  const config = loadConfig(process.env, 'ingest');
  logger.level = config.LOG_LEVEL;
  releasers.setTimeout(config.INGEST_SHUTDOWN_TIMEOUT);
  const workers = config.INGEST_WORKERS === 0 ? availableParallelism() : config.INGEST_WORKERS;
  if (workers > 1 && cluster.isPrimary) await runSupervisor(config, logger, workers, releasers);
  else await runServer(config, logger, cluster.isWorker, releasers);
  releasers.onSignals();
} catch (e) {
  const err = coerceError(e);
  logger.fatal({ err, code: (err as { code?: string }).code }, 'ingest refused to start');
  // A plain line for a person at a terminal, or when the logs are silenced; a log pipeline gets only the JSON line
  // above (a clustered worker that cannot start during a Redis outage must not break one-object-per-line).
  if (process.stderr.isTTY || !logger.isLevelEnabled('fatal')) console.error(`ingest: ${err.message}`);
  await releasers.shutdown('startup-failure', 1);
}
