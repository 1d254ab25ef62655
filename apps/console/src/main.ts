import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry, registerQueueDepthGauge, startMetricsServer } from '@mcb/core/metrics';
import { createPlatformClient } from '@mcb/core/platform';
import { CALLBACKS_QUEUE, MAINTENANCE_QUEUE } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { Queue } from 'bullmq';
import { buildApp } from './app.ts';

// Only wiring. Each resource registers its release as it is created; shutdown runs them in reverse order.
const releasers: { name: string; release: () => Promise<unknown> }[] = [];
const logger = createLogger({ name: 'console' });

let stopping = false;
async function shutdown(signal: string, exitCode = 0): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down');
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
  const config = loadConfig(process.env, 'console');
  logger.level = config.LOG_LEVEL;

  const db = createDb(config.DATABASE_URL, { max: 10, applicationName: 'mcb-console' });
  releasers.push({ name: 'postgres', release: () => db.close() });
  const platform = createPlatformClient({
    baseUrl: config.PLATFORM_BASE_URL!,
    merchantNo: config.MERCHANT_NO!,
    getOrderPath: config.PLATFORM_GET_ORDER_PATH,
    contentType: config.PLATFORM_CONTENT_TYPE,
    timeoutMs: config.PLATFORM_TIMEOUT,
  });
  releasers.push({ name: 'platform', release: () => platform.close() });

  // The dashboard's Redis connection fails fast (an operator gets an error, not a hang) while Redis is down.
  const redis = createRedis(config.REDIS_URL, 'producer', { connectionName: 'mcb-console', commandTimeoutMs: 5000 });
  redis.on('error', (e) => logger.warn({ err: coerceError(e) }, 'redis connection error'));
  releasers.push({ name: 'redis', release: () => redis.quit().catch(() => redis.disconnect()) });
  const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: config.QUEUE_PREFIX });
  const maintenance = new Queue(MAINTENANCE_QUEUE, { connection: redis, prefix: config.QUEUE_PREFIX });
  releasers.push({ name: 'queues', release: () => Promise.all([queue.close(), maintenance.close()]) });

  const registry = createMetricsRegistry('console');
  registerQueueDepthGauge(registry, [queue, maintenance]);
  const app = await buildApp({
    config,
    db,
    platform,
    logger,
    registry,
    queue,
    extraQueues: [maintenance],
    // Holds the reconciliation lock for POST /api/reconcile (the workers' lock, same key).
    redis,
    sessionTtlMs: config.CONSOLE_SESSION_TTL,
    cookieSecure: config.CONSOLE_COOKIE_SECURE,
  });
  // Closing the app first stops new requests and lets those in flight finish before the pools go.
  releasers.push({ name: 'http', release: () => app.close() });
  await app.listen({ host: config.CONSOLE_HOST, port: config.CONSOLE_PORT });

  const metricsServer = await startMetricsServer({ source: registry, port: config.CONSOLE_METRICS_PORT, host: config.CONSOLE_HOST, logger });
  releasers.push({ name: 'metrics server', release: () => metricsServer.close() });

  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  logger.info({ host: config.CONSOLE_HOST, port: config.CONSOLE_PORT, metricsPort: metricsServer.port }, 'console started');
} catch (e) {
  logger.fatal({ err: coerceError(e) }, `console failed to start: ${coerceError(e).message}`);
  await shutdown('startup-failure', 1);
}
