import { configWarnings, loadConfig } from '@mcb/core/config';
import { createDb, requireMigratedSchema } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import { createReleasers } from '@mcb/core/lifecycle';
import { createLogger, logFormatOf } from '@mcb/core/logger';
import { createMetricsRegistry, registerQueueDepthGauge, startMetricsServer } from '@mcb/core/metrics';
import { createFleet, createPlatformClientFromConfig, guardPlatform } from '@mcb/core/platform';
import { CALLBACKS_QUEUE, MAINTENANCE_QUEUE, merchantKeys } from '@mcb/core/queue';
import { createRedis, createRedisHealth, redisTargetOf } from '@mcb/core/redis';
import { startTracing } from '@mcb/core/tracing';
import { Queue } from 'bullmq';
import { alertOnReviewOpened, createAlerter } from './alerts.ts';
import { createAdaptiveLimit, eventLoopDelaySampler } from './adaptive-concurrency.ts';
import { createCallbackWorker } from './callback-worker.ts';
import { forcedClose } from './jobs-in-progress.ts';
import { createMaintenanceWorker } from './maintenance-worker.ts';
import { createReconcileMetrics, sweepSettingsFromConfig } from '@mcb/settlement';
import { createWorkerMetrics, registerCommitWaitGauges } from './metrics.ts';

// Only wiring. Each resource registers its release here as it is created; shutdown runs them in reverse order.
// To add a worker, create it after the callback worker and add its close.
const logger = createLogger({ name: 'worker', format: logFormatOf(process.env) });
const releasers = createReleasers(logger, { stoppingMessage: 'shutting down: finishing jobs in progress' });

try {
  const config = loadConfig(process.env, 'worker');
  // First: queues and workers take BullMQ's telemetry when they are built; released last, after the spans they end.
  const tracing = startTracing('mcb-worker', { ...process.env, ...config });
  if (tracing) releasers.add('tracing', () => tracing.shutdown());
  logger.level = config.LOG_LEVEL;
  releasers.setTimeout(config.WORKER_SHUTDOWN_TIMEOUT);
  for (const warning of configWarnings(config)) logger.warn(warning);
  // How soon a dead worker's jobs run again: the lock must lapse, then a stalled check must see it. The defaults
  // (lock max(30 s, 3 × PLATFORM_TIMEOUT), check every 30 s) suit production; the chaos suite shortens both.
  const lockDurationMs = config.WORKER_LOCK_DURATION ?? Math.max(30_000, config.PLATFORM_TIMEOUT * 3);
  const stalledIntervalMs = config.WORKER_STALLED_INTERVAL;

  const registry = createMetricsRegistry('worker');
  // Watched before any BullMQ object uses it: their copies of its connection errors are then only counted.
  const redisHealth = createRedisHealth({ logger, registry });
  const redis = createRedis(redisTargetOf(config), 'worker', { connectionName: 'mcb-worker' });
  redisHealth.watch(redis, 'mcb-worker');
  releasers.add(
    'redis',
    () => redis.quit(),
    () => redis.disconnect(),
  );
  // Jobs waiting on Get order hold no connection: the pool serves the batchers (one commit and two look-ups in
  // flight), reviews and the sweep, not the jobs in flight.
  const db = createDb(config.DATABASE_URL, {
    max: config.WORKER_DB_POOL,
    applicationName: 'mcb-worker',
  });
  releasers.add('postgres', () => db.close());
  // Before any job is taken: a missing migration stops the worker here, naming it (DB_SCHEMA_OUTDATED).
  await requireMigratedSchema(db.pool, { app: 'worker', logger });
  const metrics = createWorkerMetrics(registry);
  // COMMITs that wait (a synchronous standby gone): alert PostgresCommitsStalled, docs/runbook.md.
  registerCommitWaitGauges(registry, db.pool);
  // Jobs in flight: pinned by WORKER_CONCURRENCY, or adapted to Get order's latency and failures (docs/worker.md).
  const adaptive =
    config.WORKER_CONCURRENCY === undefined
      ? createAdaptiveLimit({
          max: config.WORKER_MAX_IN_FLIGHT,
          maxRps: config.PLATFORM_MAX_RPS,
          loopDelayMs: eventLoopDelaySampler(),
        })
      : undefined;
  // The fleet's Get order budget (PLATFORM_MAX_RPS, shared by every worker and the console) and breaker state, on
  // the queue's Redis connection under the queue prefix (docs/deployment.md "Sizing").
  const fleet = createFleet({
    redis,
    keys: merchantKeys(config.QUEUE_PREFIX).fleet,
    maxRps: config.PLATFORM_MAX_RPS,
    registry,
    logger,
  });
  releasers.add('fleet budget', () => fleet.close());
  // One keep-alive connection per Get order in flight at most; the guard takes Get order's start times from the
  // fleet's budget and pauses Get order while the platform keeps failing, so an outage costs jobs time rather than attempts.
  const platform = guardPlatform(
    createPlatformClientFromConfig(config, { connections: config.WORKER_CONCURRENCY ?? config.WORKER_MAX_IN_FLIGHT }),
    {
      fleet,
      onSample: adaptive?.sample,
      onStateChange: (state) => {
        adaptive?.paused(state === 'open');
        metrics.platformCircuitOpen.set(state === 'closed' ? 0 : 1);
        logger[state === 'closed' ? 'info' : 'warn']({ state }, `platform circuit breaker ${state}`);
      },
    },
  );
  releasers.add('platform', () => platform.close());
  // Alerts (ALERT_WEBHOOK_URL): closed after the workers, so their last messages still go out.
  const alerts = createAlerter({ url: config.ALERT_WEBHOOK_URL, logger });
  releasers.add('alerts', () => alerts.close());
  // Queue depth by state for Prometheus, read at scrape time.
  const depthQueues = [CALLBACKS_QUEUE, MAINTENANCE_QUEUE].map(
    (name) => new Queue(name, { connection: redis, prefix: config.QUEUE_PREFIX }),
  );
  for (const q of depthQueues) redisHealth.listen(q, `${q.name} depth queue`);
  registerQueueDepthGauge(registry, depthQueues);
  releasers.add('depth queues', () => Promise.all(depthQueues.map((q) => q.close())));
  const callbacks = createCallbackWorker({
    alerts,
    connection: redis,
    redisHealth,
    prefix: config.QUEUE_PREFIX,
    concurrency: config.WORKER_CONCURRENCY,
    adaptive,
    commitBatch: config.WORKER_COMMIT_BATCH,
    maxUnknownWaiting: config.WORKER_MAX_UNKNOWN_WAITING,
    db: db.db,
    platform,
    logger,
    metrics,
    orderGracePeriodMs: config.ORDER_GRACE_PERIOD,
    confirmMaxWaitMs: config.CONFIRM_MAX_WAIT,
    // The lock must outlive the slowest platform call by a wide margin.
    lockDurationMs,
    stalledIntervalMs,
  });
  releasers.add('callback worker', () => callbacks.close(), forcedClose(callbacks, logger));

  // Reconciliation sweep and catalog refresh on the maintenance queue (docs/reconciliation.md).
  const maintenance = await createMaintenanceWorker({
    onReviewOpened: alertOnReviewOpened(alerts),
    connection: redis,
    redisHealth,
    prefix: config.QUEUE_PREFIX,
    db: db.db,
    platform,
    logger,
    metrics,
    redis,
    lockKey: merchantKeys(config.QUEUE_PREFIX).sweepLock,
    merchantNo: config.MERCHANT_NO!,
    settings: sweepSettingsFromConfig(config),
    reconcileMetrics: createReconcileMetrics(registry),
    reconcileEveryMs: config.RECONCILE_INTERVAL,
    catalogRefreshEveryMs: config.CATALOG_REFRESH_INTERVAL,
  });
  releasers.add('maintenance worker', () => maintenance.close(), forcedClose(maintenance.worker, logger));

  const metricsServer = await startMetricsServer({
    source: registry,
    host: config.WORKER_METRICS_HOST,
    port: config.WORKER_METRICS_PORT,
    logger,
    readiness: redisHealth.readiness,
  });
  releasers.add('metrics server', () => metricsServer.close());

  releasers.onSignals();
  logger.info(
    {
      concurrency: config.WORKER_CONCURRENCY ?? `adaptive (max ${config.WORKER_MAX_IN_FLIGHT})`,
      maxRps: config.PLATFORM_MAX_RPS,
      commitBatch: config.WORKER_COMMIT_BATCH,
      dbPool: config.WORKER_DB_POOL,
      prefix: config.QUEUE_PREFIX,
      metricsPort: metricsServer.port,
    },
    'worker started',
  );
} catch (e) {
  logger.fatal({ err: coerceError(e) }, `worker failed to start: ${coerceError(e).message}`);
  await releasers.shutdown('startup-failure', 1);
}
