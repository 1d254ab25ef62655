/**
 * Checks before any app starts: Postgres and Redis answer (else exact instructions to start them), whether Redis
 * keeps acknowledged writes (ingest refuses a volatile one unless told), and the migrations.
 */
import { migrateDatabase, type MigrateResult } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import { Redis } from 'ioredis';
import pg from 'pg';
import { checkRedisDurability, type DurabilityReport } from '@mcb/core/redis';

/** How to get Postgres and Redis running; printed whenever one of them does not answer. */
export const HOW_TO_START_SERVICES = [
  'Start them, then run the command again. Any one of:',
  '  - Docker:          docker compose up -d postgres redis      (from the repository root; Redis with AOF, fsync always)',
  '  - Debian packages: sudo pg_ctlcluster <version> main start   (`pg_lsclusters` shows the version)',
  '                     redis-server --daemonize yes --appendonly yes --appendfsync always --maxmemory-policy noeviction',
  '  - your own:        DATABASE_URL=postgres://user@host:5432/db REDIS_URL=redis://host:6379 pnpm demo',
  '  - none:            unset DATABASE_URL and REDIS_URL (and MCB_OWN_SERVICES if it is 0): dev and demo then start their own',
].join('\n');

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

function adminUrl(databaseUrl: string): string {
  const u = new URL(databaseUrl);
  u.pathname = '/postgres';
  return u.toString();
}

/** Whether the Postgres server answers a query; the reason when not. */
export async function probePostgres(databaseUrl: string, timeoutMs = 3000): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: adminUrl(databaseUrl), connectionTimeoutMillis: timeoutMs });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (e) {
    const err = coerceError(e) as Error & { code?: string };
    return `Postgres at ${hostOf(databaseUrl)} is not reachable (${err.code ?? err.message})`;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A short-lived Redis connection that gives up at once instead of reconnecting forever. */
function probeClient(redisUrl: string, timeoutMs: number): Redis {
  const redis = new Redis(redisUrl, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    connectionName: 'mcb-local-preflight',
  });
  redis.on('error', () => {});
  return redis;
}

/** Whether Redis answers PING; the reason when not. */
export async function probeRedis(redisUrl: string, timeoutMs = 3000): Promise<string | undefined> {
  const redis = probeClient(redisUrl, timeoutMs);
  try {
    await redis.connect();
    if ((await redis.ping()) !== 'PONG') return `Redis at ${hostOf(redisUrl)} did not answer PING`;
    return undefined;
  } catch (e) {
    const err = coerceError(e) as Error & { code?: string };
    return `Redis at ${hostOf(redisUrl)} is not reachable (${err.code ?? err.message})`;
  } finally {
    redis.disconnect();
  }
}

/** Both services, checked together; throws one Error naming each unreachable one and how to start them. */
export async function requireServices(databaseUrl: string, redisUrl: string): Promise<void> {
  const problems = (await Promise.all([probePostgres(databaseUrl), probeRedis(redisUrl)])).filter(
    (p) => p !== undefined,
  );
  if (problems.length > 0) throw new Error(`${problems.join('\n')}\n\n${HOW_TO_START_SERVICES}`);
}

/** Ingest's own durability check, run against the stack's Redis (read-only: CONFIG GET / INFO). */
export async function redisDurability(redisUrl: string): Promise<DurabilityReport> {
  const redis = probeClient(redisUrl, 3000);
  try {
    await redis.connect();
    return await checkRedisDurability(redis);
  } finally {
    redis.disconnect();
  }
}

/** The volatile-Redis warning, said plainly once per run. */
export function volatileRedisWarning(report: DurabilityReport): string {
  return [
    'NOTE: this Redis does not keep acknowledged writes:',
    ...report.problems.map((p) => `  - ${p}`),
    '  This run starts ingest with INGEST_ALLOW_VOLATILE_REDIS=true: fine for a demo or local development, never for production.',
    '  Production needs the compose Redis (appendonly yes, appendfsync always, maxmemory-policy noeviction).',
  ].join('\n');
}

/**
 * Create the database when missing and apply pending migrations; `merchantNo` (the stack's MERCHANT_NO) is what rows
 * of a database written before merchant numbers belong to (null: several merchants, no default number).
 * `finishMerchants`: drop the single-merchant indexes (`pnpm db:migrate --finish-merchants`).
 */
export async function migrate(
  databaseUrl: string,
  merchantNo?: string | null,
  options: { finishMerchants?: boolean } = {},
): Promise<MigrateResult> {
  return migrateDatabase(databaseUrl, { defaultMerchantNo: merchantNo, finishMerchants: options.finishMerchants });
}
