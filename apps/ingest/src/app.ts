import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { assertImplicitRejection, type KeyRing } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { AppError, coerceError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import { checkRedisDurability, type DurabilityReport } from './durability.ts';
import { createIngestMetrics, type IngestMetrics } from './metrics.ts';
import { CONTENT_FAILURE_STATUS, sendText } from './reply.ts';
import { CALLBACK_ROUTES, registerCallbackRoutes } from './routes/callbacks.ts';
import { registerHealthRoutes } from './routes/health.ts';

export { checkRedisDurability, type DurabilityMode, type DurabilityReport } from './durability.ts';
export { enqueueCallback, type EnqueueOptions } from './enqueue.ts';
export { createIngestMetrics, type IngestMetrics } from './metrics.ts';

/** What {@link buildApp} needs. */
export interface IngestDeps {
  config: Config;
  /** The `callbacks` queue, created on a `createRedis(url, 'producer')` connection with `prefix: config.QUEUE_PREFIX`. */
  queue: Queue;
  logger: Logger;
  keyRing: KeyRing;
  /** The queue's connection (WAITAOF must run on it; readiness pings it). @defaultValue the queue's own client */
  redis?: Redis;
  /** Registry for the ingest metrics (served by main.ts on the separate metrics listener). @defaultValue a new one */
  metricsRegistry?: Registry;
  /** Flipped by main.ts on SIGTERM: readiness fails and new callbacks get 503 while in-flight ones finish. */
  isShuttingDown?: () => boolean;
  /** Budget of one enqueue, in ms. @defaultValue 1000 */
  enqueueTimeoutMs?: number;
  /** How often Redis durability is re-checked while running, in ms. @defaultValue 5000 */
  durabilityCheckIntervalMs?: number;
  /** How long to wait for Redis at start, in ms. @defaultValue 5000 */
  redisStartTimeoutMs?: number;
}

/** An ingest app, with its metrics for tests and main.ts. */
export type IngestApp = FastifyInstance & { ingestMetrics: IngestMetrics };

async function waitForRedis(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new AppError(ErrorCodes.ENQUEUE_FAILED, `Redis not reachable within ${timeoutMs} ms`, { transient: true }));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}

/**
 * Refuse a Redis that may lose acknowledged callbacks, unless volatile Redis is explicitly allowed (then warn).
 * @throws AppError REDIS_NOT_DURABLE naming each unsafe setting
 */
export function enforceDurability(report: DurabilityReport, allowVolatile: boolean, logger: Logger): void {
  if (report.durable) {
    logger.info({ mode: report.mode, settings: report.settings }, 'Redis keeps acknowledged writes');
    return;
  }
  if (allowVolatile) {
    logger.warn({ problems: report.problems }, 'INGEST_ALLOW_VOLATILE_REDIS=true: acknowledged callbacks may be lost (not for production)');
    return;
  }
  throw new AppError(
    ErrorCodes.REDIS_NOT_DURABLE,
    `Redis does not keep acknowledged callbacks:\n  - ${report.problems.join('\n  - ')}\n` +
      'Fix the Redis settings, or set INGEST_ALLOW_VOLATILE_REDIS=true to start anyway (never in production).',
    { details: { problems: report.problems, settings: report.settings } },
  );
}

/**
 * The public ingest app: the callback routes, `/healthz` and `/readyz`, nothing else. Checks at build time that the
 * runtime has RSA implicit rejection and that Redis is durable (see {@link enforceDurability}); throws otherwise.
 */
export async function buildApp(deps: IngestDeps): Promise<IngestApp> {
  const { config, logger } = deps;
  assertImplicitRejection();
  if (!config.MERCHANT_NO) throw new AppError(ErrorCodes.CONFIG_INVALID, 'MERCHANT_NO: required for ingest (unset)');
  const redis = deps.redis ?? ((await deps.queue.getBackend().client) as unknown as Redis);
  await waitForRedis(redis, deps.redisStartTimeoutMs ?? 5000);
  let report = await checkRedisDurability(redis);
  enforceDurability(report, config.INGEST_ALLOW_VOLATILE_REDIS, logger);
  const allowVolatile = config.INGEST_ALLOW_VOLATILE_REDIS;

  // Re-check while running: a Redis reconfigured to lose writes must stop us acknowledging callbacks.
  const refresh = async () => {
    try {
      const next = await checkRedisDurability(redis);
      if (next.durable !== report.durable || next.mode !== report.mode) {
        logger[next.durable || allowVolatile ? 'warn' : 'error']({ mode: next.mode, problems: next.problems }, 'Redis durability changed');
      }
      report = next;
    } catch {
      // Redis unreachable: keep the last report; readiness pings Redis itself and adds fail fast meanwhile.
    }
  };
  const timer = setInterval(() => void refresh(), deps.durabilityCheckIntervalMs ?? 5000);
  timer.unref();

  // Without listeners a connection error would be thrown from the emitter; log it, at most every 10 s.
  let lastErrorLog = 0;
  const onRedisError = (e: unknown) => {
    if (Date.now() - lastErrorLog < 10_000) return;
    lastErrorLog = Date.now();
    logger.warn({ err: coerceError(e) }, 'Redis connection error (callbacks get 503 fail until it recovers)');
  };
  deps.queue.on('error', onRedisError);
  redis.on('error', onRedisError);

  const metrics = createIngestMetrics(deps.metricsRegistry ?? new Registry());
  const shuttingDown = deps.isShuttingDown ?? (() => false);
  const app = Fastify({
    loggerInstance: logger,
    // One line per callback is ours (order numbers, outcome); fastify's per-request lines would only add noise.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.INGEST_BODY_LIMIT,
    // We answer 503 `fail` ourselves while closing, in the same shape as every other failure.
    return503OnClosing: false,
    trustProxy: false,
  }) as unknown as FastifyInstance;

  // Only application/json is accepted; the raw text reaches the handler so that a malformed body fails the same
  // way as every other content failure. Any other media type is FST_ERR_CTP_INVALID_MEDIA_TYPE (415).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  app.addHook('onRequest', async (request, reply) => {
    if (shuttingDown() && (request.url.split('?')[0] ?? '') in CALLBACK_ROUTES) return sendText(reply, 503, 'fail');
  });

  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: number }).statusCode;
    if (status === 413 || status === 415) {
      logger.warn({ url: request.url, reqId: request.id, code: (error as { code?: string }).code }, 'callback rejected');
      return sendText(reply, status, 'fail');
    }
    if (status !== undefined && status >= 400 && status < 500) return sendText(reply, CONTENT_FAILURE_STATUS, 'fail');
    logger.error({ url: request.url, reqId: request.id, err: coerceError(error) }, 'unexpected error in ingest');
    return sendText(reply, 500, 'fail');
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    if (path in CALLBACK_ROUTES) return sendText(reply.header('allow', 'POST'), 405, 'fail');
    return sendText(reply, 404, 'fail');
  });

  registerCallbackRoutes(app, {
    config,
    queue: deps.queue,
    redis,
    logger,
    keyRing: deps.keyRing,
    metrics,
    durability: () => ({ acceptWrites: report.durable || allowVolatile, waitAof: report.mode === 'waitaof' }),
    enqueueTimeoutMs: deps.enqueueTimeoutMs ?? 1000,
  });

  registerHealthRoutes(app, async () => {
    let redisOk = false;
    try {
      redisOk = (await redis.ping()) === 'PONG';
    } catch {
      redisOk = false;
    }
    const durableOk = report.durable || allowVolatile;
    const checks = {
      redis: redisOk ? 'ok' : 'unreachable',
      durability: report.durable ? report.mode : allowVolatile ? 'volatile (allowed)' : 'not durable',
      shutdown: shuttingDown() ? 'shutting down' : 'no',
    };
    return { ready: redisOk && durableOk && !shuttingDown(), checks };
  });

  app.addHook('onClose', async () => {
    clearInterval(timer);
    deps.queue.off('error', onRedisError);
    redis.off('error', onRedisError);
  });
  return Object.assign(app, { ingestMetrics: metrics });
}
