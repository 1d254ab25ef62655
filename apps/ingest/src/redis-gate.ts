/**
 * The Redis gate: whether Redis may take callbacks now (`accept()`), why not (the refusal, logged without a flood),
 * and what `/readyz` says of it. It re-reads durability and replicas, and measures memory headroom, while ingest
 * runs. What stops acknowledgements the moment Redis no longer keeps writes is each batch's own check
 * (store-batch.ts); a batch that finds so asks the gate for a re-read at once.
 */
import type { Config } from '@mcb/core/config';
import { ErrorCodes } from '@mcb/core/errors';
import { createLogThrottle, type Logger } from '@mcb/core/logger';
import {
  batchDurabilityCheckOf,
  checkRedisDurability,
  checkRedisMemory,
  type BatchDurabilityCheck,
  type DurabilityReport,
  type RedisClient,
} from '@mcb/core/redis';
import type { IngestMetrics } from './metrics.ts';

/** Why the gate refuses callbacks (the `code` of the 503 and of its log line). */
export type RedisRefusal =
  typeof ErrorCodes.REDIS_NOT_DURABLE | typeof ErrorCodes.REDIS_MEMORY_LOW | typeof ErrorCodes.REDIS_REPLICAS_OFFLINE;

/** The gate's verdict for one callback, as Redis was last read. */
export interface Acceptance {
  /** Durable (or volatile allowed), enough replicas online, memory headroom left. */
  acceptWrites: boolean;
  /** How the callback's batch proves that Redis keeps it (the batch's own check, whatever was last read). */
  check: BatchDurabilityCheck;
  /** Why not, when `acceptWrites` is false. */
  refusal: RedisRefusal;
}

/** Readiness as `/readyz` serves it. */
export interface Readiness {
  ready: boolean;
  checks: Record<string, string>;
}

/** Whether Redis may take callbacks, and what readiness says of it. */
export interface RedisGate {
  /** The verdict for a callback now (no round trip: the last reads). */
  accept(): Acceptance;
  /** Log a callback the gate refused: one line per 10 s, with the count refused meanwhile. */
  noteRefusal(fields: Record<string, unknown>, refusal: RedisRefusal): void;
  /** A batch found that Redis does not keep it now: log it (throttled) and re-read durability at once. */
  onNotDurable(problems: string[]): void;
  /** Redis answers a ping, and the last reads (plus `shuttingDown`) allow callbacks. */
  readiness(shuttingDown: () => boolean): Promise<Readiness>;
  /** Stop the re-reads. */
  close(): void;
}

/** Options of {@link createRedisGate}. */
export interface RedisGateOptions {
  config: Config;
  logger: Logger;
  metrics: IngestMetrics;
  /** The durability report read at start (checkStartup). */
  report: DurabilityReport;
  /** How often durability and replicas are re-read, in ms. */
  durabilityCheckIntervalMs: number;
  /** How often memory headroom is measured, in ms. */
  memoryCheckIntervalMs: number;
}

/** One line per refused callback would turn a flood into a log flood: one per this many ms, with the count. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

const REFUSAL_MESSAGES: Readonly<Record<RedisRefusal, string>> = {
  REDIS_MEMORY_LOW: 'callbacks not acknowledged: Redis memory headroom is low (see readyz); the platform retries',
  REDIS_REPLICAS_OFFLINE:
    'callbacks not acknowledged: fewer Redis replicas online than INGEST_MIN_REPLICAS (see readyz); ' +
    'the platform retries',
  REDIS_NOT_DURABLE: 'callbacks not acknowledged: Redis is not durable now (see readyz)',
};

/** The gate on `redis` (the queue's connection). Reads memory once before it returns. */
export async function createRedisGate(redis: RedisClient, options: RedisGateOptions): Promise<RedisGate> {
  const { config, logger } = options;
  const allowVolatile = config.INGEST_ALLOW_VOLATILE_REDIS;
  const durability = watchDurability(redis, options);
  const memory = await watchMemory(redis, options);
  const logThrottled = createLogThrottle(logger);
  let lastRefusalLog = 0;
  let refusedSinceLog = 0;
  return {
    accept() {
      const report = durability.report();
      const memoryLow = memory.low();
      return {
        acceptWrites: (report.durable || allowVolatile) && report.replication.ok && !memoryLow,
        check: batchDurabilityCheckOf(report, allowVolatile),
        refusal: memoryLow
          ? ErrorCodes.REDIS_MEMORY_LOW
          : !report.replication.ok
            ? ErrorCodes.REDIS_REPLICAS_OFFLINE
            : ErrorCodes.REDIS_NOT_DURABLE,
      };
    },
    noteRefusal(fields, refusal) {
      refusedSinceLog++;
      if (Date.now() - lastRefusalLog < REFUSAL_LOG_INTERVAL_MS) return;
      logger.error(
        { ...fields, outcome: 'unavailable', code: refusal, refusedSinceLastLine: refusedSinceLog },
        REFUSAL_MESSAGES[refusal],
      );
      lastRefusalLog = Date.now();
      refusedSinceLog = 0;
    },
    onNotDurable(problems) {
      logThrottled(
        'not-durable',
        'error',
        { problems },
        'a batch found that Redis does not keep it now: not acknowledged (503); re-reading durability',
      );
      void durability.refreshNow();
    },
    async readiness(shuttingDown) {
      const redisOk = await answersPing(redis);
      return readinessOf({
        redisOk,
        report: durability.report(),
        memory: memory.last(),
        memoryLow: memory.low(),
        allowVolatile,
        shuttingDown: shuttingDown(),
      });
    },
    close() {
      durability.close();
      memory.close();
    },
  };
}

async function answersPing(redis: RedisClient): Promise<boolean> {
  try {
    return (await redis.ping()) === 'PONG';
  } catch {
    return false;
  }
}

/** What `/readyz` is decided on: the ping now, and the gate's last reads. */
export interface ReadinessInputs {
  redisOk: boolean;
  report: DurabilityReport;
  memory: { maxBytes: number; headroom: number };
  memoryLow: boolean;
  allowVolatile: boolean;
  shuttingDown: boolean;
}

/** `/readyz`: ready only when every check allows callbacks; each check says what it found. */
export function readinessOf(r: ReadinessInputs): Readiness {
  const { report, memory } = r;
  const checks = {
    redis: r.redisOk ? 'ok' : 'unreachable',
    durability: report.durable ? report.mode : r.allowVolatile ? 'volatile (allowed)' : 'not durable',
    shutdown: r.shuttingDown ? 'shutting down' : 'no',
    replicas:
      report.replication.required === 0
        ? 'not required'
        : `${report.replication.online} online, ${report.replication.required} required`,
    memory:
      memory.maxBytes === 0
        ? 'no maxmemory'
        : `${(memory.headroom * 100).toFixed(0)}% free${r.memoryLow ? ' (below INGEST_REDIS_MIN_HEADROOM)' : ''}`,
  };
  const durableOk = report.durable || r.allowVolatile;
  return { ready: r.redisOk && durableOk && report.replication.ok && !r.memoryLow && !r.shuttingDown, checks };
}

/** Durability and replicas, re-read every interval (and at once on request), each change logged. */
function watchDurability(redis: RedisClient, options: RedisGateOptions) {
  const { config, logger } = options;
  const allowVolatile = config.INGEST_ALLOW_VOLATILE_REDIS;
  let report = options.report;
  let refreshing: Promise<void> | undefined;
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
  const refreshNow = () => {
    refreshing ??= refresh().finally(() => (refreshing = undefined));
    return refreshing;
  };
  const timer = setInterval(() => void refreshNow(), options.durabilityCheckIntervalMs);
  timer.unref();
  return { report: () => report, refreshNow, close: () => clearInterval(timer) };
}

/**
 * Memory headroom, measured every interval: below INGEST_REDIS_MIN_HEADROOM the gate refuses new callbacks (503,
 * readiness fails) before Redis refuses writes, so the platform retries later and the worker keeps the room it needs
 * to complete and free jobs.
 */
async function watchMemory(redis: RedisClient, options: RedisGateOptions) {
  const { logger, metrics } = options;
  const minHeadroom = options.config.INGEST_REDIS_MIN_HEADROOM;
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
          'Redis memory headroom below INGEST_REDIS_MIN_HEADROOM: refusing callbacks (503) until the worker frees ' +
            'room or maxmemory is raised',
        );
      else logger.warn(fields, 'Redis memory headroom restored: accepting callbacks again');
    }
    memoryLow = low;
  };
  const timer = setInterval(() => void measure(), options.memoryCheckIntervalMs);
  timer.unref();
  return { last: () => memory, low: () => memoryLow, close: () => clearInterval(timer) };
}
