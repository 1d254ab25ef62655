/**
 * Ingest entry point: only wiring. With INGEST_WORKERS > 1 (0 = one per core) a primary runs the start-up checks
 * once, forks the workers that share the public port (RSA decryption is the main cost), serves aggregated metrics
 * on INGEST_METRICS_PORT and forwards SIGTERM. Each worker (or the single process) builds and serves the app.
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { Queue } from 'bullmq';
import { AggregatorRegistry } from 'prom-client';
import { assertImplicitRejection, loadKeyRingFromFiles } from '@mcb/core/callback';
import { loadConfig, type Config } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { createLogger, type Logger } from '@mcb/core/logger';
import { createMetricsRegistry, registerQueueDepthGauge, startMetricsServer, type MetricsServer } from '@mcb/core/metrics';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { buildApp, checkRedisDurability, enforceDurability } from './app.ts';

const SHUTDOWN_GRACE_MS = 25_000;

function fatal(logger: Logger | undefined, e: unknown): never {
  const err = coerceError(e);
  logger?.fatal({ err, code: (err as { code?: string }).code }, 'ingest refused to start');
  console.error(`ingest: ${err.message}`);
  process.exit(1);
}

/** Start-up checks that must hold before anything listens: runtime, keys, Redis durability. */
async function preflight(config: Config, logger: Logger): Promise<void> {
  assertImplicitRejection();
  loadKeyRingFromFiles([config.MERCHANT_PRIVATE_KEY_FILE ?? '']);
  const redis = createRedis(config.REDIS_URL, 'producer', { connectionName: 'ingest-preflight' });
  redis.on('error', () => {});
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`Redis at REDIS_URL not reachable within 10 s`)), 10_000);
      redis.once('ready', () => (clearTimeout(timer), resolve()));
    });
    enforceDurability(await checkRedisDurability(redis), config.INGEST_ALLOW_VOLATILE_REDIS, logger);
  } finally {
    redis.disconnect();
  }
}

async function runServer(config: Config, logger: Logger, clustered: boolean): Promise<void> {
  const keyRing = loadKeyRingFromFiles([config.MERCHANT_PRIVATE_KEY_FILE ?? '']);
  logger.info({ keys: keyRing.keys.map((k) => ({ id: k.id, bits: k.bits })) }, 'key ring loaded');
  const redis = createRedis(config.REDIS_URL, 'producer', { connectionName: 'ingest' });
  const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: config.QUEUE_PREFIX });
  const registry = createMetricsRegistry('ingest');
  // Queue depth by state, read at scrape time (max across cluster workers: they all read the same queue).
  registerQueueDepthGauge(registry, queue);
  if (clustered) {
    // Answer the primary's metrics requests from the first moment: the primary's scrape waits for every worker,
    // so a worker that only listened after its (slow) start-up would make scrapes time out meanwhile.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([registry]);
  }
  let shuttingDown = false;
  const app = await buildApp({ config, queue, redis, logger, keyRing, metricsRegistry: registry, isShuttingDown: () => shuttingDown });
  let metricsServer: MetricsServer | undefined;
  if (!clustered) {
    metricsServer = await startMetricsServer({
      host: config.INGEST_HOST,
      port: config.INGEST_METRICS_PORT,
      logger,
      source: registry,
    });
  }
  await app.listen({ host: config.INGEST_HOST, port: config.INGEST_PORT });
  logger.info({ port: config.INGEST_PORT, metricsPort: metricsServer?.port }, 'ingest listening');

  const stop = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    logger.info({ signal }, 'shutting down: finishing in-flight callbacks');
    setTimeout(() => fatal(logger, new Error('shutdown took too long')), SHUTDOWN_GRACE_MS).unref();
    await app.close(); // waits for in-flight requests; new callbacks get 503 fail meanwhile
    await queue.close();
    await redis.quit().catch(() => redis.disconnect());
    await metricsServer?.close();
    logger.info('ingest stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

async function runPrimary(config: Config, logger: Logger, workers: number): Promise<void> {
  await preflight(config, logger);
  const aggregator = new AggregatorRegistry();
  const metricsServer = await startMetricsServer({
    host: config.INGEST_HOST,
    port: config.INGEST_METRICS_PORT,
    logger,
    source: async () => ({ contentType: aggregator.contentType, body: await aggregator.clusterMetrics() }),
  });
  let stopping = false;
  const recentExits: number[] = [];
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    const now = Date.now();
    recentExits.push(now);
    while (recentExits.length && now - (recentExits[0] ?? now) > 60_000) recentExits.shift();
    logger.error({ pid: worker.process.pid, code, signal }, 'ingest worker exited');
    if (recentExits.length > workers * 3) fatal(logger, new Error('ingest workers keep exiting; giving up'));
    setTimeout(() => cluster.fork(), 1000);
  });
  for (let i = 0; i < workers; i++) cluster.fork();
  logger.info({ workers, metricsPort: metricsServer.port }, 'ingest primary started');

  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping ingest workers');
    const alive = Object.values(cluster.workers ?? {}).filter((w) => w !== undefined);
    await Promise.all(
      alive.map(
        (w) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => w.process.kill('SIGKILL'), SHUTDOWN_GRACE_MS + 2000);
            w.once('exit', () => (clearTimeout(timer), resolve()));
            w.process.kill('SIGTERM');
          }),
      ),
    );
    await metricsServer.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

let logger: Logger | undefined;
try {
  const config = loadConfig(process.env, 'ingest');
  logger = createLogger({ name: 'ingest', level: config.LOG_LEVEL });
  const workers = config.INGEST_WORKERS === 0 ? availableParallelism() : config.INGEST_WORKERS;
  if (workers > 1 && cluster.isPrimary) await runPrimary(config, logger, workers);
  else await runServer(config, logger, cluster.isWorker);
} catch (e) {
  fatal(logger, e);
}
