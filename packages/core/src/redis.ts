import { Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config/index.ts';
import { parseRedisNodes, type RedisTarget } from './redis-target.ts';

export type { Redis } from 'ioredis';
export { describeRedisTarget, parseRedisNodes, type RedisTarget } from './redis-target.ts';

/** The Redis every process of this config talks to (validated by loadConfig: exactly one topology). */
export function redisTargetOf(config: Pick<Config, 'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'REDIS_PASSWORD'>): RedisTarget {
  if (config.REDIS_SENTINELS === undefined) return { kind: 'single', url: config.REDIS_URL };
  const sentinels = parseRedisNodes(config.REDIS_SENTINELS);
  if (typeof sentinels === 'string') throw new Error(`REDIS_SENTINELS: ${sentinels}`);
  return { kind: 'sentinel', sentinels, name: config.REDIS_SENTINEL_NAME ?? '', ...(config.REDIS_PASSWORD ? { password: config.REDIS_PASSWORD } : {}) };
}

/**
 * What a connection is for:
 * - `producer`: the public path (ingest, console actions). Fails fast when Redis is down (no offline queue,
 *   one retry per request, short timeouts) so that a caller gets an answer within about a second.
 * - `worker`: BullMQ workers and queue events. Waits out outages (`maxRetriesPerRequest: null`, as BullMQ requires).
 */
export type RedisRole = 'producer' | 'worker';

/** Options of {@link createRedis}. */
export interface CreateRedisOptions {
  /** Upper bound of one command on a producer connection, in ms. @defaultValue 1000 */
  commandTimeoutMs?: number;
  /** Name shown by CLIENT LIST, to tell our connections apart. */
  connectionName?: string;
}

/**
 * A connection to `target` (a URL, or a {@link RedisTarget} from {@link redisTargetOf}). Through Sentinel, ioredis asks
 * the sentinels for the primary, and again after a failover, a `READONLY` reply or a lost connection.
 */
export function createRedis(target: string | RedisTarget, role: RedisRole, options: CreateRedisOptions = {}): Redis {
  const common: RedisOptions = {
    connectionName: options.connectionName,
    // Reconnect forever with a capped backoff; each role decides how requests behave meanwhile.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), 2000),
  };
  const roleOptions: RedisOptions =
    role === 'producer'
      ? { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 1000, commandTimeout: options.commandTimeoutMs ?? 1000, lazyConnect: false }
      : { maxRetriesPerRequest: null, enableReadyCheck: true };
  const t: RedisTarget = typeof target === 'string' ? { kind: 'single', url: target } : target;
  if (t.kind === 'single') return new Redis(t.url, { ...common, ...roleOptions });
  return new Redis({
    ...common,
    ...roleOptions,
    sentinels: t.sentinels,
    name: t.name,
    ...(t.password ? { password: t.password } : {}),
    // A demoted primary answers writes with READONLY: reconnect, which asks the sentinels for the new one.
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
    sentinelRetryStrategy: (times) => Math.min(100 * times, 2000),
    failoverDetector: true,
  });
}
export { checkRedisDurability, checkRedisMemory, type DurabilityMode, type DurabilityReport, type RedisMemoryReport } from './redis-durability.ts';
