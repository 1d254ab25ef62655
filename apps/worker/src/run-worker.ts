import type { Config } from '@mcb/core/config';
import { createDb, requireMigratedSchema, type Database } from '@mcb/core/db';
import { createReleasers, type Releasers } from '@mcb/core/lifecycle';
import type { Logger } from '@mcb/core/logger';
import { createMetricsRegistry, startMetricsServer, type Registry } from '@mcb/core/metrics';
import { createRedis, createRedisHealth, redisTargetOf, type RedisClient, type RedisHealth } from '@mcb/core/redis';
import { poolOf } from '@mcb/settlement';
import { AggregatorRegistry } from 'prom-client';
import { createAlerter, type Alerter } from './alerts.ts';
import { createLanes, type Lane, type WorkerTuning } from './lane.ts';
import { registerCommitWaitGauges } from './metrics.ts';

/** Options of {@link runWorker}. */
export interface RunWorkerOptions {
  /** The worker's settings and merchants: `loadConfig(env, 'worker')`. */
  config: Config;
  logger: Logger;
  /**
   * Where each resource registers its close as it is created (main.ts's: signals, the bounded shutdown, the forced
   * closes, the exit). @defaultValue the runner's own, with no exit: `stop()` runs them
   */
  releasers?: Releasers;
  /**
   * Clients the runner uses instead of making its own from the config; their owner closes them, after the runner.
   * @defaultValue a pool on DATABASE_URL (WORKER_DB_POOL) and a `worker` connection to the config's Redis
   */
  clients?: { database?: Database; redis?: RedisClient };
  /** This process's name on the jobs it takes (BullMQ's `processedBy`). @defaultValue none */
  name?: string;
  /** What tests and the bench set beyond the config; production sets nothing here. @defaultValue none */
  tuning?: WorkerTuning;
}

/**
 * A running worker process (graphile-worker's `Runner`): its lanes, what tests and operators read, and one way to
 * stop it.
 */
export interface WorkerRunner {
  /** One lane per merchant of `config.merchants`, in that order. */
  readonly lanes: readonly Lane[];
  /** The lane of merchant `ref`; throws for a ref the config does not name. @defaultValue the first lane */
  lane(ref?: string): Lane;
  /** The process's metrics registry (Redis health, commit waits, Node's own); the lanes' are served beside it. */
  readonly registry: Registry;
  /** Port of the ops listener (`/metrics`, `/healthz`, `/readyz`): WORKER_METRICS_PORT, or the one given for 0. */
  readonly metricsPort: number;
  /** The Redis connection the lanes' queues, fleets and sweep locks use. */
  readonly redis: RedisClient;
  /** The Postgres handle of the money path. */
  readonly database: Database;
  /** Settles once the runner has stopped (everything closed). */
  readonly done: Promise<void>;
  /**
   * Stop taking jobs, finish those in progress, close everything in reverse order of creation, within
   * WORKER_SHUTDOWN_TIMEOUT (what is left then is forced). With main.ts's releasers this ends the process.
   */
  stop(): Promise<void>;
}

/**
 * Build and start everything a worker process runs (docs/worker.md): the clients, the metrics, one lane per merchant
 * (its callbacks queue and maintenance queue, each with its own worker, adaptive limit, breaker, Get order budget
 * and connection pool), and the ops listener. Each resource's close is registered as it is made; a failure on the
 * way closes what was made (with the runner's own releasers) or is left to the caller's (main.ts's).
 */
export async function runWorker(options: RunWorkerOptions): Promise<WorkerRunner> {
  const { config, logger } = options;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const releasers =
    options.releasers ??
    createReleasers(logger, {
      stoppingMessage: 'shutting down: finishing jobs in progress',
      timeoutMs: config.WORKER_SHUTDOWN_TIMEOUT,
      exit: () => undefined,
    });
  // Registered first, released last: `done` settles once everything else is closed (or forced).
  releasers.add('runner', async () => resolveDone(), resolveDone);
  try {
    const shared = await openShared(options, releasers);
    const lanes = await createLanes({
      ...shared,
      config,
      logger,
      releasers,
      name: options.name,
      tuning: options.tuning,
    });
    await Promise.all(lanes.map((lane) => lane.callbacks.waitUntilReady()));
    const metricsServer = await startMetricsServer({
      source: metricsOf(shared.registry, lanes),
      host: config.WORKER_METRICS_HOST,
      port: config.WORKER_METRICS_PORT,
      logger,
      readiness: shared.redisHealth.readiness,
    });
    releasers.add('metrics server', () => metricsServer.close());
    logStarted(config, logger, metricsServer.port);
    return {
      lanes,
      lane(ref) {
        const lane = ref === undefined ? lanes[0] : lanes.find((l) => l.merchant.ref === ref);
        if (!lane)
          throw new Error(`no lane for merchant "${ref}": the config names ${lanes.map((l) => l.merchant.ref)}`);
        return lane;
      },
      registry: shared.registry,
      metricsPort: metricsServer.port,
      redis: shared.redis,
      database: shared.database,
      done,
      stop: () => releasers.shutdown('stop'),
    };
  } catch (e) {
    if (!options.releasers) await releasers.shutdown('startup-failure', 1);
    throw e;
  }
}

/** What every lane of the process shares: the registry, Redis and its health, Postgres, the alerts. */
export interface SharedClients {
  registry: Registry;
  redisHealth: RedisHealth;
  redis: RedisClient;
  database: Database;
  alerts: Alerter;
}

/** The process's shared clients, each registered with `releasers` (those given in `options.clients` are not closed). */
async function openShared(options: RunWorkerOptions, releasers: Releasers): Promise<SharedClients> {
  const { config, logger } = options;
  const registry = createMetricsRegistry('worker');
  // Watched before any BullMQ object uses it: their copies of its connection errors are then only counted.
  const redisHealth = createRedisHealth({ logger, registry });
  const redis =
    options.clients?.redis ?? createRedis(redisTargetOf(config), 'worker', { connectionName: 'mcb-worker' });
  redisHealth.watch(redis, 'mcb-worker');
  if (!options.clients?.redis)
    releasers.add(
      'redis',
      () => redis.quit(),
      () => redis.disconnect(),
    );
  // Jobs waiting on Get order hold no connection: the pool serves the batchers (one commit and two look-ups in
  // flight), reviews and the sweep, not the jobs in flight.
  let database = options.clients?.database;
  if (!database) {
    const db = createDb(config.DATABASE_URL, {
      max: config.WORKER_DB_POOL,
      applicationName: 'mcb-worker',
      connectionTimeoutMs: options.tuning?.dbConnectionTimeoutMs,
    });
    releasers.add('postgres', () => db.close());
    database = db.db;
  }
  // Before any job is taken: a missing migration stops the worker here, naming it (DB_SCHEMA_OUTDATED).
  await requireMigratedSchema(poolOf(database), { app: 'worker', logger, merchants: config.merchants.length });
  // COMMITs that wait (a synchronous standby gone): alert PostgresCommitsStalled, docs/runbook.md.
  registerCommitWaitGauges(registry, poolOf(database));
  // Alerts (ALERT_WEBHOOK_URL): closed after the workers, so their last messages still go out.
  const alerts = options.tuning?.alerts ?? createAlerter({ url: config.ALERT_WEBHOOK_URL, logger });
  releasers.add('alerts', () => alerts.close());
  return { registry, redisHealth, redis, database, alerts };
}

/**
 * `/metrics`: the process's registry and every lane's, in one exposition. The lanes' series differ by their
 * `merchant` label, so merging them by name only gathers each metric's series under one HELP and TYPE.
 */
function metricsOf(registry: Registry, lanes: readonly Lane[]): () => Promise<{ contentType: string; body: string }> {
  return async () => {
    const all = await Promise.all([registry, ...lanes.map((l) => l.registry)].map((r) => r.getMetricsAsJSON()));
    const merged = AggregatorRegistry.aggregate(all);
    return { contentType: registry.contentType, body: await merged.metrics() };
  };
}

/** The start line operators and the process tests wait for ("worker started"). */
function logStarted(config: Config, logger: Logger, metricsPort: number): void {
  logger.info(
    {
      concurrency: config.WORKER_CONCURRENCY ?? `adaptive (max ${config.WORKER_MAX_IN_FLIGHT})`,
      maxRps: config.PLATFORM_MAX_RPS,
      commitBatch: config.WORKER_COMMIT_BATCH,
      dbPool: config.WORKER_DB_POOL,
      prefix: config.QUEUE_PREFIX,
      merchants: config.merchants.map((m) => m.ref),
      metricsPort,
    },
    'worker started',
  );
}
