import { Redis, type RedisOptions } from 'ioredis';

export type { Redis } from 'ioredis';

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

export function createRedis(url: string, role: RedisRole, options: CreateRedisOptions = {}): Redis {
  const common: RedisOptions = {
    connectionName: options.connectionName,
    // Reconnect forever with a capped backoff; each role decides how requests behave meanwhile.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), 2000),
  };
  if (role === 'producer') {
    return new Redis(url, {
      ...common,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 1000,
      commandTimeout: options.commandTimeoutMs ?? 1000,
      lazyConnect: false,
    });
  }
  return new Redis(url, { ...common, maxRetriesPerRequest: null, enableReadyCheck: true });
}
export { checkRedisDurability, checkRedisMemory, type DurabilityMode, type DurabilityReport, type RedisMemoryReport } from './redis-durability.ts';
