import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry, registerQueueDepthGauge, startMetricsServer } from '@mcb/core/metrics';
import { createPlatformClient } from '@mcb/core/platform';
import { CALLBACKS_QUEUE, MAINTENANCE_QUEUE } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { Queue } from 'bullmq';
import { alertOnReviewOpened, createAlerter } from './alerts.ts';
import { createCallbackWorker } from './callback-worker.ts';
import { createMaintenanceWorker } from './maintenance-worker.ts';
import { createReconcileMetrics, sweepLockKey, sweepSettingsFromConfig } from './reconcile/index.ts';
import { createWorkerMetrics } from './metrics.ts';

// Only wiring. Each resource registers its release here as it is created; shutdown runs them in reverse order.
// To add a worker (e.g. the maintenance queue), create it after the callback worker and push its close.
const releasers: { name: string; release: () => Promise<unknown> }[] = [];
const logger = createLogger({ name: 'worker' });

let stopping = false;
async function shutdown(signal: string, exitCode = 0): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down: finishing jobs in progress');
  for (const { name, release } of releasers.reverse()) {
    try {
      await release();
    } catch (e) {
      logger.error({ err: coerceError(e), resource: name }, 'close failed');
    }
  }
  logger.info('stopped');
  process.exit(exitCode);
}

try {
  const config = loadConfig(process.env, 'worker');
  logger.level = config.LOG_LEVEL;
  // How soon a dead worker's jobs run again: the lock must lapse, then a stalled check must see it. The defaults
  // (lock max(30 s, 3 × PLATFORM_TIMEOUT), check every 30 s) suit production; the chaos suite shortens both.
  const lockDurationMs = config.WORKER_LOCK_DURATION ?? Math.max(30_000, config.PLATFORM_TIMEOUT * 3);
  const stalledIntervalMs = config.WORKER_STALLED_INTERVAL;

  const redis = createRedis(config.REDIS_URL, 'worker', { connectionName: 'mcb-worker' });
  releasers.push({ name: 'redis', release: () => redis.quit() });
  const db = createDb(config.DATABASE_URL, {
    max: Math.min(config.WORKER_CONCURRENCY + 2, 50),
    applicationName: 'mcb-worker',
  });
  releasers.push({ name: 'postgres', release: () => db.close() });
  const platform = createPlatformClient({
    baseUrl: config.PLATFORM_BASE_URL!,
    merchantNo: config.MERCHANT_NO!,
    getOrderPath: config.PLATFORM_GET_ORDER_PATH,
    contentType: config.PLATFORM_CONTENT_TYPE,
    timeoutMs: config.PLATFORM_TIMEOUT,
  });
  releasers.push({ name: 'platform', release: () => platform.close() });

  const registry = createMetricsRegistry('worker');
  const metrics = createWorkerMetrics(registry);
  // Alerts (ALERT_WEBHOOK_URL): closed after the workers, so their last messages still go out.
  const alerts = createAlerter({ url: config.ALERT_WEBHOOK_URL, logger });
  releasers.push({ name: 'alerts', release: () => alerts.close() });
  // Queue depth by state for Prometheus, read at scrape time.
  const depthQueues = [CALLBACKS_QUEUE, MAINTENANCE_QUEUE].map((name) => new Queue(name, { connection: redis, prefix: config.QUEUE_PREFIX }));
  registerQueueDepthGauge(registry, depthQueues);
  releasers.push({ name: 'depth queues', release: () => Promise.all(depthQueues.map((q) => q.close())) });
  const callbacks = createCallbackWorker({
    alerts,
    connection: redis,
    prefix: config.QUEUE_PREFIX,
    concurrency: config.WORKER_CONCURRENCY,
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
  releasers.push({ name: 'callback worker', release: () => callbacks.close() });

  // Reconciliation sweep and catalog refresh on the maintenance queue (docs/reconciliation.md).
  const maintenance = await createMaintenanceWorker({
    onReviewOpened: alertOnReviewOpened(alerts),
    connection: redis,
    prefix: config.QUEUE_PREFIX,
    db: db.db,
    platform,
    logger,
    metrics,
    redis,
    lockKey: sweepLockKey(config.QUEUE_PREFIX),
    merchantNo: config.MERCHANT_NO!,
    settings: sweepSettingsFromConfig(config),
    reconcileMetrics: createReconcileMetrics(registry),
    reconcileEveryMs: config.RECONCILE_INTERVAL,
    catalogRefreshEveryMs: config.CATALOG_REFRESH_INTERVAL,
  });
  releasers.push({ name: 'maintenance worker', release: () => maintenance.close() });

  const metricsServer = await startMetricsServer({ source: registry, port: config.WORKER_METRICS_PORT, logger });
  releasers.push({ name: 'metrics server', release: () => metricsServer.close() });

  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  logger.info(
    { concurrency: config.WORKER_CONCURRENCY, prefix: config.QUEUE_PREFIX, metricsPort: metricsServer.port },
    'worker started',
  );
} catch (e) {
  logger.fatal({ err: coerceError(e) }, `worker failed to start: ${coerceError(e).message}`);
  await shutdown('startup-failure', 1);
}
