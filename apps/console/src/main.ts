// First, before anything that loads drizzle-orm is resolved (@mcb/core/module-hooks says why): the database and the
// app, which load it, come by import() below.
import '@mcb/core/module-hooks';
import { configWarnings, legacyMerchant, loadConfig } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { createReleasers } from '@mcb/core/lifecycle';
import { createLogger, logFormatOf } from '@mcb/core/logger';
import { createMetricsRegistry, registerQueueDepthGauge, startMetricsServer } from '@mcb/core/metrics';
import { merchantKeys } from '@mcb/core/queue';
import { createRedis, createRedisHealth, redisTargetOf } from '@mcb/core/redis';
import { startTracing } from '@mcb/core/tracing';
import { Queue } from 'bullmq';
import { merchantQueues } from './callbacks/merchant-queues.ts';
import { createConsolePlatforms } from './platforms.ts';

// Only wiring. Each resource registers its release as it is created; shutdown runs them in reverse order.
const logger = createLogger({ name: 'console', format: logFormatOf(process.env) });
const releasers = createReleasers(logger);

try {
  const config = loadConfig(process.env, 'console');
  // First: queues and workers take BullMQ's telemetry when they are built; released last, after the spans they end.
  const tracing = startTracing('mcb-console', { ...process.env, ...config });
  if (tracing) releasers.add('tracing', () => tracing.shutdown());
  logger.level = config.LOG_LEVEL;
  releasers.setTimeout(config.CONSOLE_SHUTDOWN_TIMEOUT);
  for (const warning of configWarnings(config)) logger.warn(warning);

  const [{ createDb, requireMigratedSchema }, { buildApp }] = await Promise.all([
    import('@mcb/core/db'),
    import('./app.ts'),
  ]);
  const db = createDb(config.DATABASE_URL, { max: 10, applicationName: 'mcb-console' });
  releasers.add('postgres', () => db.close());
  // Before it serves anything (replays and the dashboard enqueue jobs): a missing migration stops it here.
  // Two or more merchants also need the single-merchant indexes gone (`pnpm db:migrate --finish-merchants`).
  await requireMigratedSchema(db.pool, { app: 'console', logger, merchants: config.merchants.length });
  // The dashboard's Redis connection fails fast (an operator gets an error, not a hang) while Redis is down. Its
  // errors, and the queues' copies of them, are logged at most once per interval (watched before the queues exist).
  const registry = createMetricsRegistry('console');
  const redisHealth = createRedisHealth({ logger, registry });
  const redis = createRedis(redisTargetOf(config), 'producer', {
    connectionName: 'mcb-console',
    commandTimeoutMs: 5000,
  });
  redisHealth.watch(redis, 'mcb-console');
  releasers.add(
    'redis',
    () => redis.quit().catch(() => redis.disconnect()),
    () => redis.disconnect(),
  );
  // Every merchant's callbacks and maintenance queues (merchantKeys: `default` keeps today's names).
  const queues = merchantQueues(
    config.merchants,
    config.QUEUE_PREFIX,
    (name, prefix) => new Queue(name, { connection: redis, prefix }),
  );
  const refOf = new Map<unknown, string>(queues.list.map((m) => [m.queue, m.ref]));
  const maintenance = config.merchants.map((m) => {
    const keys = merchantKeys(config.QUEUE_PREFIX, m.ref);
    const queue = new Queue(keys.maintenanceQueue, { connection: redis, prefix: keys.prefix });
    refOf.set(queue, m.ref);
    return queue;
  });
  const all = [...queues.list.map((m) => m.queue), ...maintenance];
  for (const q of all) redisHealth.listen(q, `${q.name} queue`);
  releasers.add('queues', () => Promise.all(all.map((q) => q.close())));
  // Re-verify, the dry run, "sweep now" and the catalog: each merchant's own platform client, asking Get order out of
  // its fleet-wide budget (getOrderRps ?? PLATFORM_MAX_RPS), beside the workers (platforms.ts).
  const { platforms, registries, metrics } = createConsolePlatforms({ config, redis, registry, logger, releasers });
  const home = legacyMerchant(config.merchants) ?? config.merchants[0]!;

  registerQueueDepthGauge(registry, all, { merchantOf: (q) => refOf.get(q)! });
  const app = await buildApp({
    config,
    db,
    platform: platforms.get(home.ref)!,
    platforms,
    logger,
    registry,
    merchantRegistries: registries,
    queues,
    extraQueues: maintenance,
    // Holds the reconciliation lock for POST /api/reconcile (the workers' lock, same key).
    redis,
    sessionTtlMs: config.CONSOLE_SESSION_TTL,
    cookieSecure: config.CONSOLE_COOKIE_SECURE,
  });
  // Closing the app first stops new requests and lets those in flight finish before the pools go.
  releasers.add('http', () => app.close());
  await app.listen({ host: config.CONSOLE_HOST, port: config.CONSOLE_PORT });

  const metricsServer = await startMetricsServer({
    source: metrics,
    port: config.CONSOLE_METRICS_PORT,
    host: config.CONSOLE_METRICS_HOST,
    logger,
    readiness: redisHealth.readiness,
  });
  releasers.add('metrics server', () => metricsServer.close());

  releasers.onSignals();
  logger.info(
    { host: config.CONSOLE_HOST, port: config.CONSOLE_PORT, metricsPort: metricsServer.port },
    'console started',
  );
} catch (e) {
  logger.fatal({ err: coerceError(e) }, `console failed to start: ${coerceError(e).message}`);
  await releasers.shutdown('startup-failure', 1);
}
