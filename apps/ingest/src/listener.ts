/**
 * The public listener: fastify with every connection bounded (docs/ingest.md, "Connection bounds"). Node's own
 * bounds cut slow headers, slow requests and idle sockets; connection-guard.ts admits connections by source and
 * cuts slow bodies; the cap comes from capacity.ts. Every cut is counted and summed in the refusal log.
 */
import type { Socket } from 'node:net';
import { availableParallelism } from 'node:os';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Config } from '@mcb/core/config';
import type { Logger } from '@mcb/core/logger';
import { BYTES_PER_IDLE_CONNECTION, connectionCapacity, RESERVED_FILES } from './capacity.ts';
import { failAndClose, guardConnections, sourceKey, type CutReason } from './connection-guard.ts';
import type { IngestMetrics } from './metrics.ts';
import { createRefusalLog, type RefusalLog } from './refusal-log.ts';

/** What {@link createListener} needs. */
export interface ListenerDeps {
  config: Config;
  logger: Logger;
  metrics: IngestMetrics;
  /** Refused or cut connections are summed and logged at most once per this many ms. */
  refusalLogIntervalMs: number;
}

/** A fastify app whose server admits, caps and cuts connections; its refusal log is flushed when it closes. */
export function createListener(deps: ListenerDeps): FastifyInstance {
  const { config, logger, metrics } = deps;
  const refusals = createRefusalLog(logger, deps.refusalLogIntervalMs);
  const cut = (reason: CutReason, socket: Socket) => {
    metrics.connectionsCut.inc({ reason });
    refusals.note(reason, sourceKey(socket.remoteAddress));
  };
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
    clientErrorHandler: (err, socket) => cutConnection(err, socket, cut),
  }) as unknown as FastifyInstance;
  capConnections(app, deps, refusals);
  app.server.on('timeout', (socket: Socket) => {
    cut('idle', socket);
    socket.destroy();
  });
  app.addHook('onClose', async () => refusals.close());
  return app;
}

/** The cap (sized from the machine when `auto`, logged), admission by source, and the count of what the cap drops. */
function capConnections(app: FastifyInstance, deps: ListenerDeps, refusals: RefusalLog): void {
  const { config, logger, metrics } = deps;
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
  guardConnections(app.server, {
    maxPerAddress: config.INGEST_MAX_CONNECTIONS_PER_ADDRESS,
    allowedSources: config.INGEST_ALLOWED_SOURCES,
    bodyTimeoutMs: config.INGEST_BODY_TIMEOUT,
    metrics,
    refusals,
  });
  // Beyond the cap, net closes the socket itself (no `connection` event) and tells us with `drop`.
  app.server.on('drop', (data?: { remoteAddress?: string }) => {
    metrics.connectionsCut.inc({ reason: 'max_connections' });
    refusals.note('max_connections', sourceKey(data?.remoteAddress));
  });
}

/** A connection-level failure (a timeout, a malformed request line): the uniform `fail` reply, then close. */
function cutConnection(
  err: Error & { code?: string },
  socket: Socket,
  cut: (reason: CutReason, socket: Socket) => void,
): void {
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
