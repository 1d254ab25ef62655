import type { FastifyInstance } from 'fastify';
import type { Queue } from 'bullmq';
import { decoyKeyRing, prepareDecryption, type KeyRing } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { createLogThrottle, type Logger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import type { RedisClient } from '@mcb/core/redis';
import { installReplyBoundary } from './boundary.ts';
import { lanesOf, type IngestLane } from './lanes.ts';
import { createListener } from './listener.ts';
import { createIngestMetrics, type IngestMetrics } from './metrics.ts';
import { createPausedBound } from './paused-bound.ts';
import { createRedisGate } from './redis-gate.ts';
import { registerCallbackRoutes } from './routes/callbacks.ts';
import { registerHealthRoutes } from './routes/health.ts';
import { checkStartup } from './startup.ts';

export { checkRedisDurability, type DurabilityMode, type DurabilityReport } from '@mcb/core/redis';
export { createEnqueuer, enqueueCallback, type Enqueuer, type EnqueuerOptions } from './enqueue.ts';
export { closeLanes, lanesOf, openLanes, type IngestLane } from './lanes.ts';
export { createIngestMetrics, type IngestMetrics } from './metrics.ts';
export { checkStartup, enforceDurability, loadKeyRingsFromConfig, preflight } from './startup.ts';

/** What {@link buildApp} needs. */
export interface IngestDeps {
  config: Config;
  /**
   * One lane per merchant of `config.merchants`: its key ring and its queue, every queue on one
   * `createRedis(url, 'producer')` connection (see openLanes). Or, for a deployment of one merchant, `queue` and
   * `keyRing`.
   */
  lanes?: readonly IngestLane[];
  /** The one merchant's `callbacks` queue (with `prefix: config.QUEUE_PREFIX`), when `lanes` is not given. */
  queue?: Queue;
  /** The one merchant's key ring, when `lanes` is not given. */
  keyRing?: KeyRing;
  logger: Logger;
  /**
   * The ring a callback to a route no merchant serves is opened with before it is refused, so that it costs what a
   * wrong key does. @defaultValue decoyKeyRing of the lanes' rings (generated once per process)
   */
  decoyKeyRing?: KeyRing;
  /** The queues' connection (WAITAOF must run on it; readiness pings it). @defaultValue the first queue's client */
  redis?: RedisClient;
  /** Registry for the ingest metrics (served by main.ts on the separate metrics listener). @defaultValue a new one */
  metricsRegistry?: Registry;
  /** Flipped by main.ts on SIGTERM: readiness fails and new callbacks get 503 while in-flight ones finish. */
  isShuttingDown?: () => boolean;
  /** Budget of one enqueue, in ms. @defaultValue 1000 */
  enqueueTimeoutMs?: number;
  /**
   * How often Redis durability and replicas are re-read while running (readiness, early 503s, recovery), in ms.
   * Acknowledgements do not wait for it: each batch checks durability itself. @defaultValue 5000
   */
  durabilityCheckIntervalMs?: number;
  /** How often Redis memory headroom is measured, in ms. @defaultValue 1000 */
  memoryCheckIntervalMs?: number;
  /** How long to wait for Redis at start, in ms. @defaultValue 5000 */
  redisStartTimeoutMs?: number;
  /** Refused or cut connections are summed and logged at most once per this many ms. @defaultValue 10000 */
  refusalLogIntervalMs?: number;
}

/** An ingest app, with its metrics for tests and main.ts. */
export type IngestApp = FastifyInstance & { ingestMetrics: IngestMetrics };

/**
 * The public ingest app: the callback routes (each merchant's, and the legacy ones), `/healthz` and `/readyz`,
 * nothing else. Runs {@link checkStartup} first (implicit rejection, merchant numbers, Redis reachable and durable);
 * throws otherwise.
 */
export async function buildApp(deps: IngestDeps): Promise<IngestApp> {
  const { config, logger } = deps;
  const lanes = lanesOf(config, deps);
  const redis = deps.redis ?? ((await lanes[0]!.queue.getBackend().client) as unknown as RedisClient);
  const report = await checkStartup(config, redis, logger, deps.redisStartTimeoutMs ?? 5000);
  const metrics = createIngestMetrics(deps.metricsRegistry ?? new Registry());
  const gate = await createRedisGate(redis, {
    config,
    logger,
    metrics,
    report,
    durabilityCheckIntervalMs: deps.durabilityCheckIntervalMs ?? 5000,
    memoryCheckIntervalMs: deps.memoryCheckIntervalMs ?? 1000,
  });
  const stopLoggingErrors = logConnectionErrors(logger, [...lanes.map((l) => l.queue), redis]);
  const decoy = deps.decoyKeyRing ?? decoyKeyRing(lanes.map((l) => l.keyRing));
  prepareDecryption(decoy.keys); // on the same decryption call as the merchants' keys
  const shuttingDown = deps.isShuttingDown ?? (() => false);
  const app = createListener({ config, logger, metrics, refusalLogIntervalMs: deps.refusalLogIntervalMs ?? 10_000 });
  installReplyBoundary(app, { logger, shuttingDown });
  registerCallbackRoutes(app, {
    config,
    lanes,
    decoyKeyRing: decoy,
    redis,
    logger,
    metrics,
    gate,
    enqueueTimeoutMs: deps.enqueueTimeoutMs ?? 1000,
    pausedBound: createPausedBound({
      redis,
      queuePrefix: config.QUEUE_PREFIX,
      maxBacklog: config.MERCHANT_PAUSED_MAX_BACKLOG,
      metrics,
      logger,
    }),
  });
  registerHealthRoutes(app, () => gate.readiness(shuttingDown));
  app.addHook('onClose', async () => {
    gate.close();
    stopLoggingErrors();
  });
  return Object.assign(app, { ingestMetrics: metrics });
}

/** Something that emits a Redis connection's errors: the connection itself, or the queue on it. */
interface ErrorEmitter {
  on(event: 'error', listener: (e: unknown) => void): unknown;
  off(event: 'error', listener: (e: unknown) => void): unknown;
}

/**
 * Without listeners a connection error would be thrown from the emitter (or written raw to stderr by BullMQ); log
 * it, at most one line per 10 s with the count of errors it stands for. Returns the way to stop.
 */
function logConnectionErrors(logger: Logger, emitters: readonly ErrorEmitter[]): () => void {
  const logThrottled = createLogThrottle(logger);
  const onRedisError = (e: unknown) =>
    void logThrottled(
      'redis',
      'warn',
      { err: coerceError(e) },
      'Redis connection error (callbacks get 503 fail until it recovers)',
    );
  for (const emitter of emitters) emitter.on('error', onRedisError);
  return () => {
    for (const emitter of emitters) emitter.off('error', onRedisError);
  };
}
