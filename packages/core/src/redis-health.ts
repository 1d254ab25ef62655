import { Gauge, type Registry } from 'prom-client';
import { coerceError } from './errors.ts';
import { createLogThrottle, type LogThrottle } from './log-throttle.ts';
import type { Logger } from './logger.ts';
import type { RedisClient } from './redis-nodes.ts';

/** Anything that emits 'error' events: a BullMQ Queue, Worker or QueueEvents, an ioredis client. */
export interface ErrorEmitter {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** Options of {@link createRedisHealth}. */
export interface RedisHealthOptions {
  logger: Logger;
  /** Where `mcb_redis_up` and `mcb_redis_down_since_seconds` go. @defaultValue none */
  registry?: Registry;
  /** Shortest time between two error lines of one connection or emitter, in ms. @defaultValue 10000 */
  logIntervalMs?: number;
}

/** Options of {@link RedisHealth.watch}. */
export interface WatchOptions {
  /** Log the connection's errors (throttled); off when the caller already listens and logs. @defaultValue true */
  logErrors?: boolean;
}

/**
 * Whether this process reaches Redis, since when it does not, and where Redis errors are logged: at most one line
 * per interval per connection (or per BullMQ object), each with how many errors it stands for, through the logger.
 */
export interface RedisHealth {
  /** Follow a connection's state (for readiness and the gauges) and log its errors. */
  watch(client: RedisClient, name: string, options?: WatchOptions): void;
  /**
   * Log a BullMQ object's 'error' events. Without a listener BullMQ writes each one to stderr as a raw multi-line
   * trace. Connection errors while a watched connection is already known to be down are only counted: they are
   * copies of what its line reports (BullMQ forwards the shared connection's errors to every object using it).
   */
  listen(emitter: ErrorEmitter, name: string): void;
  /** Report an error an emitter's own listener received (as {@link listen} would). */
  report(name: string, err: unknown): void;
  /** Since when (ms since the epoch) a watched connection is not ready; undefined while all are. */
  downSince(): number | undefined;
  /** For `/readyz`: ready while every watched connection is. */
  readiness(): { ready: boolean; checks: Record<string, string> };
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/** What ioredis's messages say when the connection is missing. */
const CONNECTION_MISSING = new RegExp(
  [
    'Connection is closed',
    'connect E[A-Z]+',
    'Reached the max retries per request',
    'Failed to refresh slots cache',
    'None of startup nodes is available',
    'All sentinels are unreachable',
  ].join('|'),
);

/** Whether an error says the connection to Redis is missing (rather than a command or script failing). */
export function isRedisConnectionError(err: unknown): boolean {
  const e = coerceError(err) as Error & { code?: unknown };
  if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) return true;
  return CONNECTION_MISSING.test(e.message);
}

/** See {@link RedisHealth}. */
export function createRedisHealth(options: RedisHealthOptions): RedisHealth {
  const { logger } = options;
  const log: LogThrottle = createLogThrottle(logger, { intervalMs: options.logIntervalMs });
  const watched = new Map<string, { client: RedisClient; downSince: number | undefined }>();

  const downSince = (): number | undefined => {
    const times = [...watched.values()].flatMap((w) => (w.downSince === undefined ? [] : [w.downSince]));
    return times.length ? Math.min(...times) : undefined;
  };

  if (options.registry) {
    new Gauge({
      name: 'mcb_redis_up',
      help: 'Whether this connection to Redis is ready (1) or not (0)',
      labelNames: ['connection'],
      registers: [options.registry],
      aggregator: 'min',
      collect() {
        for (const [name, w] of watched) this.set({ connection: name }, w.client.status === 'ready' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'mcb_redis_down_since_seconds',
      help: 'Unix time since which this connection to Redis has been unreachable; 0 while it is reachable',
      labelNames: ['connection'],
      registers: [options.registry],
      aggregator: 'max',
      collect() {
        for (const [name, w] of watched)
          this.set({ connection: name }, w.downSince === undefined ? 0 : Math.floor(w.downSince / 1000));
      },
    });
  }

  const report = (name: string, err: unknown): void => {
    const e = coerceError(err);
    // A copy of what the watched connection's own line reports (watch() runs before the BullMQ objects exist, so its
    // listener marks the connection down before theirs hear the same error).
    if (isRedisConnectionError(e) && downSince() !== undefined) return;
    log(name, 'error', { err: e, source: name }, `${name}: ${e.message}`);
  };

  return {
    watch(client, name, watchOptions = {}) {
      const state = { client, downSince: undefined as number | undefined };
      watched.set(name, state);
      const markDown = () => {
        if (client.status !== 'ready') state.downSince ??= Date.now();
      };
      client.on('close', markDown);
      client.on('end', markDown);
      client.on('error', (err: Error) => {
        // A reset arrives while ioredis still says "ready" (its close comes after): a connection error marks it down
        // at once, so BullMQ's copies of the same error, which may be heard next, are only counted.
        if (isRedisConnectionError(err)) state.downSince ??= Date.now();
        else markDown();
        if (watchOptions.logErrors === false) return;
        const since = state.downSince === undefined ? undefined : new Date(state.downSince).toISOString();
        log(
          `redis:${name}`,
          'error',
          { err: coerceError(err), connection: name, downSince: since },
          `Redis connection ${name}: ${coerceError(err).message}`,
        );
      });
      client.on('ready', () => {
        if (state.downSince !== undefined)
          logger.info(
            { connection: name, downForMs: Date.now() - state.downSince },
            `Redis connection ${name} is back`,
          );
        state.downSince = undefined;
      });
    },
    listen(emitter, name) {
      emitter.on('error', (err) => report(name, err));
    },
    report,
    downSince,
    readiness() {
      const checks: Record<string, string> = {};
      for (const [name, w] of watched) {
        checks[`redis ${name}`] =
          w.client.status === 'ready'
            ? 'ok'
            : w.downSince === undefined
              ? w.client.status
              : `unreachable since ${new Date(w.downSince).toISOString()}`;
      }
      return { ready: [...watched.values()].every((w) => w.client.status === 'ready'), checks };
    },
  };
}
