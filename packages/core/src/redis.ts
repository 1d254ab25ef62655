import { readFileSync } from 'node:fs';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Config } from './config/index.ts';
import { AppError, ErrorCodes } from './errors.ts';
import type { RedisClient } from './redis-nodes.ts';
import { parseRedisNodes, type RedisTarget, type RedisTls } from './redis-target.ts';

export type { Cluster, Redis } from 'ioredis';
export { dataNodesOf, isCluster, nodeAddressOf, type RedisClient } from './redis-nodes.ts';

/**
 * Run a key-less command (`WAIT`, `WAITAOF`) on the same connection that wrote `anchorKey`: both commands count
 * the writes made earlier on their own connection. On a cluster a key-less command would go to any node; in a
 * pipeline with a command on `anchorKey` it goes to that key's node, over the connection the writes used.
 */
export async function callBesideKey(
  client: RedisClient,
  anchorKey: string,
  command: string,
  ...args: string[]
): Promise<unknown> {
  const replies = await client
    .pipeline()
    .exists(anchorKey)
    .call(command, ...args)
    .exec();
  const [err, reply] = replies?.[1] ?? [new Error(`${command}: no reply`), undefined];
  if (err) throw err;
  return reply;
}
export { describeRedisTarget, parseRedisNodes, type RedisTarget, type RedisTls } from './redis-target.ts';

type TargetSettings =
  'REDIS_URL' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'REDIS_CLUSTER_NODES' | 'REDIS_PASSWORD';
type TlsSettings = 'REDIS_SENTINEL_PASSWORD' | 'REDIS_TLS' | 'REDIS_TLS_CA_FILE';

/** The CA bundle of REDIS_TLS_CA_FILE, read once at start. */
function tlsOf(config: Partial<Pick<Config, TlsSettings>>, on: boolean): { tls?: RedisTls } {
  if (!on) return {};
  const file = config.REDIS_TLS_CA_FILE;
  if (file === undefined) return { tls: {} };
  try {
    return { tls: { ca: readFileSync(file, 'utf8') } };
  } catch (e) {
    throw new AppError(
      ErrorCodes.CONFIG_INVALID,
      `REDIS_TLS_CA_FILE: ${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
}

/** The Redis every process of this config talks to (validated by loadConfig: exactly one topology). */
export function redisTargetOf(config: Pick<Config, TargetSettings> & Partial<Pick<Config, TlsSettings>>): RedisTarget {
  if (config.REDIS_CLUSTER_NODES !== undefined) {
    const nodes = parseRedisNodes(config.REDIS_CLUSTER_NODES);
    if (typeof nodes === 'string') throw new Error(`REDIS_CLUSTER_NODES: ${nodes}`);
    return {
      kind: 'cluster',
      nodes,
      ...(config.REDIS_PASSWORD ? { password: config.REDIS_PASSWORD } : {}),
      ...tlsOf(config, config.REDIS_TLS === true),
    };
  }
  if (config.REDIS_SENTINELS === undefined) {
    // rediss:// turns TLS on by itself; a private CA is the only thing to add.
    const caOnly = config.REDIS_URL.startsWith('rediss:') && config.REDIS_TLS_CA_FILE !== undefined;
    return { kind: 'single', url: config.REDIS_URL, ...tlsOf(config, caOnly) };
  }
  const sentinels = parseRedisNodes(config.REDIS_SENTINELS);
  if (typeof sentinels === 'string') throw new Error(`REDIS_SENTINELS: ${sentinels}`);
  return {
    kind: 'sentinel',
    sentinels,
    name: config.REDIS_SENTINEL_NAME ?? '',
    ...(config.REDIS_PASSWORD ? { password: config.REDIS_PASSWORD } : {}),
    ...(config.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: config.REDIS_SENTINEL_PASSWORD } : {}),
    ...tlsOf(config, config.REDIS_TLS === true),
  };
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
export function createRedis(
  target: string | Exclude<RedisTarget, { kind: 'cluster' }>,
  role: RedisRole,
  options?: CreateRedisOptions,
): Redis;
export function createRedis(target: RedisTarget, role: RedisRole, options?: CreateRedisOptions): RedisClient;
export function createRedis(
  target: string | RedisTarget,
  role: RedisRole,
  options: CreateRedisOptions = {},
): RedisClient {
  const common: RedisOptions = {
    connectionName: options.connectionName,
    // Reconnect forever with a capped backoff; each role decides how requests behave meanwhile.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), 2000),
  };
  const roleOptions: RedisOptions =
    role === 'producer'
      ? {
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          connectTimeout: 1000,
          commandTimeout: options.commandTimeoutMs ?? 1000,
          lazyConnect: false,
        }
      : { maxRetriesPerRequest: null, enableReadyCheck: true };
  const t: RedisTarget = typeof target === 'string' ? { kind: 'single', url: target } : target;
  if (t.kind === 'single') return new Redis(t.url, { ...common, ...roleOptions, ...(t.tls ? { tls: t.tls } : {}) });
  if (t.kind === 'cluster') {
    // Per-node options (timeouts, retries per request) go to every node's connection; the cluster-level ones decide
    // what happens while slots are unknown: producers fail fast, workers wait (BullMQ requires it).
    const { enableOfflineQueue, retryStrategy: _perNodeRetry, ...nodeOptions } = { ...common, ...roleOptions };
    const clusterOptions: ClusterOptions = {
      redisOptions: {
        ...nodeOptions,
        ...(t.password ? { password: t.password } : {}),
        ...(t.tls ? { tls: t.tls } : {}),
      },
      enableOfflineQueue: enableOfflineQueue ?? true,
      enableReadyCheck: true,
      clusterRetryStrategy: (times) => Math.min(100 * times, 2000),
      // After a node fails, refresh the slot map rather than give up on the command.
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
      slotsRefreshTimeout: 2000,
    };
    return new Cluster(t.nodes, clusterOptions);
  }
  return new Redis({
    ...common,
    ...roleOptions,
    sentinels: t.sentinels,
    name: t.name,
    ...(t.password ? { password: t.password } : {}),
    ...(t.sentinelPassword ? { sentinelPassword: t.sentinelPassword } : {}),
    // TLS to the data nodes (`tls`) and to the sentinels (`sentinelTLS`, which ioredis uses only with this flag).
    ...(t.tls ? { tls: t.tls, sentinelTLS: t.tls, enableTLSForSentinelMode: true } : {}),
    // A demoted primary answers writes with READONLY: reconnect, which asks the sentinels for the new one.
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
    sentinelRetryStrategy: (times) => Math.min(100 * times, 2000),
    // No failoverDetector: when its +switch-master message arrives while the client is asking a sentinel for the
    // primary (the primary just died), ioredis 5 ends the connection for good ("Connection is closed." on every
    // command, seen in the failover-under-load test). Without it a dead primary means reconnecting through the
    // sentinels until they name the new one, and a demoted one answers READONLY (above).
    failoverDetector: false,
  });
}
export {
  batchDurabilityCheckOf,
  batchDurabilityProblems,
  checkRedisDurability,
  checkRedisMemory,
  DURABILITY_CONFIG_GET,
  infoField,
  type BatchDurabilityCheck,
  type DurabilityMode,
  type DurabilityReport,
  type RedisMemoryReport,
} from './redis-durability.ts';
export {
  createRedisHealth,
  isRedisConnectionError,
  type ErrorEmitter,
  type RedisHealth,
  type RedisHealthOptions,
} from './redis-health.ts';
