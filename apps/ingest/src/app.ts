import type { Socket } from 'node:net';
import { availableParallelism } from 'node:os';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Queue } from 'bullmq';
import type { KeyRing } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { coerceError, ErrorCodes } from '@mcb/core/errors';
import { createLogThrottle, type Logger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import { batchDurabilityCheckOf, checkRedisDurability, checkRedisMemory, type RedisClient } from '@mcb/core/redis';
import { BYTES_PER_IDLE_CONNECTION, connectionCapacity, RESERVED_FILES } from './capacity.ts';
import { failAndClose, guardConnections, sourceKey, type CutReason } from './connection-guard.ts';
import { createRefusalLog } from './refusal-log.ts';
import { checkStartup } from './startup.ts';
import { createIngestMetrics, type IngestMetrics } from './metrics.ts';
import { CONTENT_FAILURE_STATUS, sendText } from './reply.ts';
import { CALLBACK_ROUTES, registerCallbackRoutes } from './routes/callbacks.ts';
import { registerHealthRoutes } from './routes/health.ts';

export { checkRedisDurability, type DurabilityMode, type DurabilityReport } from '@mcb/core/redis';
export { createEnqueuer, enqueueCallback, type Enqueuer, type EnqueuerOptions } from './enqueue.ts';
export { createIngestMetrics, type IngestMetrics } from './metrics.ts';
export { checkStartup, enforceDurability, loadKeyRingFromConfig, preflight } from './startup.ts';

/** What {@link buildApp} needs. */
export interface IngestDeps {
  config: Config;
  /** The `callbacks` queue, created on a `createRedis(url, 'producer')` connection with `prefix: config.QUEUE_PREFIX`. */
  queue: Queue;
  logger: Logger;
  keyRing: KeyRing;
  /** The queue's connection (WAITAOF must run on it; readiness pings it). @defaultValue the queue's own client */
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
 * The public ingest app: the callback routes, `/healthz` and `/readyz`, nothing else. Runs {@link checkStartup}
 * first (implicit rejection, MERCHANT_NO, Redis reachable and durable); throws otherwise.
 */
export async function buildApp(deps: IngestDeps): Promise<IngestApp> {
  const { config, logger } = deps;
  const redis = deps.redis ?? ((await deps.queue.getBackend().client) as unknown as RedisClient);
  let report = await checkStartup(config, redis, logger, deps.redisStartTimeoutMs ?? 5000);
  const metrics = createIngestMetrics(deps.metricsRegistry ?? new Registry());
  const allowVolatile = config.INGEST_ALLOW_VOLATILE_REDIS;

  // Re-read while running, for readiness, early refusals and recovery. What stops acknowledgements the moment Redis no
  // longer keeps writes is each batch's own check (enqueue.ts); a batch that finds so asks for a re-read at once.
  let refreshing: Promise<void> | undefined;
  const refreshNow = () => {
    refreshing ??= refresh().finally(() => (refreshing = undefined));
    return refreshing;
  };
  const refresh = async () => {
    try {
      const next = await checkRedisDurability(redis, { minReplicas: config.INGEST_MIN_REPLICAS });
      if (next.durable !== report.durable || next.mode !== report.mode) {
        logger[next.durable || allowVolatile ? 'warn' : 'error'](
          { mode: next.mode, problems: next.problems },
          'Redis durability changed',
        );
      }
      if (next.replication.ok !== report.replication.ok) {
        const fields = { replicasOnline: next.replication.online, minReplicas: next.replication.required };
        if (next.replication.ok) logger.warn(fields, 'Redis replicas back online: accepting callbacks again');
        else
          logger.error(
            fields,
            `${next.replication.problem}; refusing callbacks (503) until enough replicas are online`,
          );
      }
      report = next;
    } catch {
      // Redis unreachable: keep the last report; readiness pings Redis itself and adds fail fast meanwhile.
    }
  };
  const timer = setInterval(() => void refreshNow(), deps.durabilityCheckIntervalMs ?? 5000);
  timer.unref();

  // Memory headroom: refuse new callbacks (503, readiness fails) before Redis refuses writes, so the platform
  // retries later and the worker keeps the room it needs to complete and free jobs.
  const minHeadroom = config.INGEST_REDIS_MIN_HEADROOM;
  let memory = await checkRedisMemory(redis);
  let memoryLow = false;
  const measure = async () => {
    try {
      memory = await checkRedisMemory(redis);
    } catch {
      return; // unreachable: readiness and the adds say so
    }
    metrics.redisHeadroom.set(memory.headroom);
    const low = minHeadroom > 0 && memory.maxBytes > 0 && memory.headroom < minHeadroom;
    if (low !== memoryLow) {
      const fields = {
        usedBytes: memory.usedBytes,
        maxBytes: memory.maxBytes,
        headroom: Number(memory.headroom.toFixed(3)),
        minHeadroom,
      };
      if (low)
        logger.error(
          fields,
          'Redis memory headroom below INGEST_REDIS_MIN_HEADROOM: refusing callbacks (503) until the worker frees room or maxmemory is raised',
        );
      else logger.warn(fields, 'Redis memory headroom restored: accepting callbacks again');
    }
    memoryLow = low;
  };
  const memoryTimer = setInterval(() => void measure(), deps.memoryCheckIntervalMs ?? 1000);
  memoryTimer.unref();

  // Without listeners a connection error would be thrown from the emitter (or written raw to stderr by BullMQ); log
  // it, at most one line per 10 s with the count of errors it stands for.
  const logThrottled = createLogThrottle(logger);
  const onRedisError = (e: unknown) =>
    void logThrottled(
      'redis',
      'warn',
      { err: coerceError(e) },
      'Redis connection error (callbacks get 503 fail until it recovers)',
    );
  deps.queue.on('error', onRedisError);
  redis.on('error', onRedisError);

  const shuttingDown = deps.isShuttingDown ?? (() => false);
  const app = Fastify({
    loggerInstance: logger,
    // One line per callback is ours (order numbers, outcome); fastify's per-request lines would only add noise.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.INGEST_BODY_LIMIT,
    // We answer 503 `fail` ourselves while closing, in the same shape as every other failure.
    return503OnClosing: false,
    trustProxy: false,
    // Every connection is bounded: a client trickling its headers or body, or holding an idle socket, is cut off
    // (see the INGEST_*_TIMEOUT settings; the body's own deadline and admission are in connection-guard.ts). Node
    // checks the headers and request bounds every connectionsCheckingInterval.
    requestTimeout: config.INGEST_REQUEST_TIMEOUT,
    keepAliveTimeout: config.INGEST_KEEPALIVE_TIMEOUT,
    connectionTimeout: config.INGEST_IDLE_TIMEOUT,
    http: {
      headersTimeout: config.INGEST_HEADERS_TIMEOUT,
      connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(config.INGEST_HEADERS_TIMEOUT / 4))),
    },
    clientErrorHandler: (err, socket) => cutConnection(err, socket),
  }) as unknown as FastifyInstance;
  const capacity = connectionCapacity(config.INGEST_MAX_CONNECTIONS, {
    processes: config.INGEST_WORKERS === 0 ? availableParallelism() : config.INGEST_WORKERS,
  });
  const { warning, ...figures } = capacity;
  logger.info(
    {
      ...figures,
      bytesPerIdleConnection: BYTES_PER_IDLE_CONNECTION,
      reservedFiles: RESERVED_FILES,
      maxConnectionsPerAddress: config.INGEST_MAX_CONNECTIONS_PER_ADDRESS,
      allowedSources: config.INGEST_ALLOWED_SOURCES?.length ?? 'any',
    },
    'connection bounds',
  );
  if (warning) logger.warn(warning);
  app.server.maxConnections = capacity.maxConnections;
  metrics.connectionsMax.set(capacity.maxConnections);
  const refusals = createRefusalLog(logger, deps.refusalLogIntervalMs ?? 10_000);
  guardConnections(app.server, {
    maxPerAddress: config.INGEST_MAX_CONNECTIONS_PER_ADDRESS,
    allowedSources: config.INGEST_ALLOWED_SOURCES,
    bodyTimeoutMs: config.INGEST_BODY_TIMEOUT,
    metrics,
    refusals,
  });
  const cut = (reason: CutReason, socket: Socket) => {
    metrics.connectionsCut.inc({ reason });
    refusals.note(reason, sourceKey(socket.remoteAddress));
  };
  // Beyond the cap, net closes the socket itself (no `connection` event) and tells us with `drop`.
  app.server.on('drop', (data?: { remoteAddress?: string }) => {
    metrics.connectionsCut.inc({ reason: 'max_connections' });
    refusals.note('max_connections', sourceKey(data?.remoteAddress));
  });
  app.server.on('timeout', (socket: Socket) => {
    cut('idle', socket);
    socket.destroy();
  });

  /** A connection-level failure (a timeout, a malformed request line): the uniform `fail` reply, then close. */
  function cutConnection(err: Error & { code?: string }, socket: Socket): void {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    cut(timeout ? 'request_timeout' : 'client_error', socket);
    failAndClose(
      socket,
      timeout
        ? '408 Request Timeout'
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? '431 Request Header Fields Too Large'
          : '400 Bad Request',
    );
  }

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
      logger.warn(
        { url: request.url, reqId: request.id, code: (error as { code?: string }).code },
        'callback rejected',
      );
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
    durability: () => ({
      acceptWrites: (report.durable || allowVolatile) && report.replication.ok && !memoryLow,
      check: batchDurabilityCheckOf(report, allowVolatile),
      refusal: memoryLow
        ? ErrorCodes.REDIS_MEMORY_LOW
        : !report.replication.ok
          ? ErrorCodes.REDIS_REPLICAS_OFFLINE
          : ErrorCodes.REDIS_NOT_DURABLE,
    }),
    onNotDurable: (problems) => {
      logThrottled(
        'not-durable',
        'error',
        { problems },
        'a batch found that Redis does not keep it now: not acknowledged (503); re-reading durability',
      );
      void refreshNow();
    },
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
      replicas:
        report.replication.required === 0
          ? 'not required'
          : `${report.replication.online} online, ${report.replication.required} required`,
      memory:
        memory.maxBytes === 0
          ? 'no maxmemory'
          : `${(memory.headroom * 100).toFixed(0)}% free${memoryLow ? ' (below INGEST_REDIS_MIN_HEADROOM)' : ''}`,
    };
    return { ready: redisOk && durableOk && report.replication.ok && !memoryLow && !shuttingDown(), checks };
  });

  app.addHook('onClose', async () => {
    refusals.close();
    clearInterval(timer);
    clearInterval(memoryTimer);
    deps.queue.off('error', onRedisError);
    redis.off('error', onRedisError);
  });
  return Object.assign(app, { ingestMetrics: metrics });
}
