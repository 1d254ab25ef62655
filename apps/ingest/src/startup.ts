import { assertImplicitRejection, loadMerchantKeyRings, type MerchantKeyRings } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import {
  checkRedisDurability,
  createRedis,
  describeRedisTarget,
  redisTargetOf,
  type DurabilityReport,
  type RedisClient,
} from '@mcb/core/redis';

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
    logger.warn(
      { problems: report.problems },
      'INGEST_ALLOW_VOLATILE_REDIS=true: acknowledged callbacks may be lost (not for production)',
    );
    return;
  }
  throw new AppError(
    ErrorCodes.REDIS_NOT_DURABLE,
    `Redis does not keep acknowledged callbacks:\n  - ${report.problems.join('\n  - ')}\n` +
      'Fix the Redis settings, or set INGEST_ALLOW_VOLATILE_REDIS=true to start anyway (never in production).',
    { details: { problems: report.problems, settings: report.settings } },
  );
}

async function waitForRedis(redis: RedisClient, where: string, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new AppError(ErrorCodes.ENQUEUE_FAILED, `Redis (${where}) not reachable within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}

/**
 * The checks ingest must pass before it listens, written once: the runtime has RSA implicit rejection, every
 * merchant's number is set, Redis answers, and Redis keeps acknowledged writes (or volatile Redis is explicitly allowed).
 * `buildApp` runs them on its own connection; the cluster supervisor runs them once before forking.
 * @returns the durability report the app starts from
 * @throws AppError CONFIG_INVALID | ENQUEUE_FAILED (Redis unreachable) | REDIS_NOT_DURABLE; Error when the runtime
 *   lacks implicit rejection
 */
export async function checkStartup(
  config: Config,
  redis: RedisClient,
  logger: Logger,
  redisTimeoutMs = 5000,
): Promise<DurabilityReport> {
  assertImplicitRejection();
  // MERCHANTS_FILE requires each entry's number; without it the one merchant's is MERCHANT_NO.
  if (config.merchants.length === 0 || config.merchants.some((m) => !m.merchantNo))
    throw new AppError(ErrorCodes.CONFIG_INVALID, 'MERCHANT_NO: required for ingest (unset)');
  await waitForRedis(redis, describeRedisTarget(redisTargetOf(config)), redisTimeoutMs);
  const report = await checkRedisDurability(redis, { minReplicas: config.INGEST_MIN_REPLICAS });
  enforceDurability(report, config.INGEST_ALLOW_VOLATILE_REDIS, logger);
  // Too few replicas online is a state, not a setting: start, refuse callbacks (503) and fail readiness until they are.
  if (!report.replication.ok)
    logger.error(
      { replicasOnline: report.replication.online, minReplicas: report.replication.required },
      `${report.replication.problem}; not ready until enough replicas are online`,
    );
  return report;
}

/**
 * Each merchant's key ring, from its `privateKeyFiles` (MERCHANTS_FILE), or MERCHANT_PRIVATE_KEY_FILE
 * (comma-separated; the first is current) for the one merchant it makes.
 * @throws AppError KEY_FILE_INVALID naming the entry and field of every bad file, and any key two merchants share
 */
export function loadKeyRingsFromConfig(config: Config): MerchantKeyRings {
  return loadMerchantKeyRings(config.merchants, {
    source: config.MERCHANTS_FILE === undefined ? 'MERCHANT_PRIVATE_KEY_FILE' : 'MERCHANTS_FILE',
  });
}

/** {@link checkStartup} on a short-lived connection of its own, plus the key rings: the supervisor's preflight. */
export async function preflight(config: Config, logger: Logger): Promise<void> {
  loadKeyRingsFromConfig(config);
  const redis = createRedis(redisTargetOf(config), 'producer', { connectionName: 'ingest-preflight' });
  redis.on('error', () => {});
  try {
    await checkStartup(config, redis, logger, 10_000);
  } finally {
    redis.disconnect();
  }
}
