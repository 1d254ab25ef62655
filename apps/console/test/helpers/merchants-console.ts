/**
 * The console of a two-merchant deployment, for tests: merchants `a` and `b` (MERCHANTS_FILE), each on a platform
 * double of its own that knows only its number, a platform client per merchant, Redis, both merchants' queues and
 * buildApp on the test's database. test/console/helpers/two-merchants.ts adds a worker to it.
 */
import type { AddressInfo } from 'node:net';
import { loadConfig, type Config } from '@mcb/core/config';
import { LEGACY_INDEXES } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import {
  startFakePlatform,
  writeMerchantsFile,
  type FakePlatform,
  type FakePlatformOptions,
  type MerchantEntry,
  type TestEnv,
} from '@mcb/testkit';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { buildApp, type ConsoleDeps } from '../../src/app.ts';
import { merchantQueues, type MerchantQueues } from '../../src/callbacks/merchant-queues.ts';
import type { OperatorEntry } from '../../src/operators/directory.ts';
import { AUTH_LIMITS_OFF, SESSION_SECRET, TOKEN } from './fake-platform.ts';

/** The two merchants' refs. */
export type MerchantRef = 'a' | 'b';
const REFS = ['a', 'b'] as const;

export interface MerchantsConsoleOptions {
  /** The merchants' numbers, by ref. @defaultValue `{ a: 'M-A', b: 'M-B' }` */
  merchantNos?: Record<MerchantRef, string>;
  /** What each merchant's platform serves from getPaymentMethods, by ref. @defaultValue none (the route is 404) */
  catalogs?: Partial<Record<MerchantRef, FakePlatformOptions['currencies']>>;
  /** Each merchant's own MERCHANTS_FILE settings (getOrderRps, weight), by ref. @defaultValue none */
  entries?: Partial<Record<MerchantRef, Partial<MerchantEntry>>>;
  /** Settings of every process of the stack (the console's, and two-merchants' worker's). @defaultValue none */
  env?: Record<string, string>;
  /** Operators besides CONSOLE_TOKEN's admin. @defaultValue none */
  operators?: readonly OperatorEntry[];
  /** Listen on a free port of 127.0.0.1 (for a browser or the CLI) rather than answer `inject` only. @defaultValue false */
  listen?: boolean;
  /**
   * Drop the single-merchant indexes first, as `db:migrate --finish-merchants` would (a second merchant may then reuse
   * an order number); the test's own database has them still. @defaultValue true
   */
  dropLegacyIndexes?: boolean;
  /** More of the console's deps. @defaultValue no replay driver */
  consoleDeps?: Partial<ConsoleDeps>;
}

export interface MerchantsConsole {
  app: FastifyInstance;
  /** The console's base URL (http://127.0.0.1:port) when it listens, else an empty string. */
  url: string;
  config: Config;
  /** The merchants, by ref: their number and their platform double. */
  merchants: Record<MerchantRef, { ref: MerchantRef; merchantNo: string; platform: FakePlatform }>;
  /** Each merchant's platform client, by ref. */
  clients: ReadonlyMap<string, PlatformClient>;
  redis: Redis;
  queues: MerchantQueues;
  /** The settings every process of the stack shares (MERCHANTS_FILE, DATABASE_URL, ...; `env` included). */
  settings: Record<string, string>;
  close(): Promise<void>;
}

/** Drop the single-merchant indexes (constraints or plain indexes) of the test's database. */
async function dropLegacyIndexes(env: TestEnv): Promise<void> {
  for (const name of LEGACY_INDEXES) {
    const { rows } = await env.db.pool.query<{ t: string }>(
      'select conrelid::regclass::text as t from pg_constraint where conname = $1',
      [name],
    );
    if (rows[0]) await env.db.pool.query(`alter table ${rows[0].t} drop constraint ${name}`);
    else await env.db.pool.query(`drop index if exists ${name}`);
  }
}

/** The two-merchant console on `env`'s database and Redis; the caller closes it with `close()`. */
export async function startMerchantsConsole(
  env: TestEnv,
  opts: MerchantsConsoleOptions = {},
): Promise<MerchantsConsole> {
  const merchantNos = opts.merchantNos ?? { a: 'M-A', b: 'M-B' };
  if (opts.dropLegacyIndexes ?? true) await dropLegacyIndexes(env);
  const platforms = {} as Record<MerchantRef, FakePlatform>;
  for (const ref of REFS) {
    const currencies = opts.catalogs?.[ref];
    platforms[ref] = await startFakePlatform({ merchantNo: merchantNos[ref], ...(currencies ? { currencies } : {}) });
  }
  const file = writeMerchantsFile(
    REFS.map((ref) => ({
      ref,
      merchantNo: merchantNos[ref],
      platformBaseUrl: platforms[ref].url,
      ...opts.entries?.[ref],
    })),
  );
  const settings = {
    MERCHANTS_FILE: file.path,
    PLATFORM_ALLOW_HTTP: 'true',
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: env.redisUrl,
    QUEUE_PREFIX: env.prefix,
    LOG_LEVEL: 'silent',
    ...opts.env,
  };
  const config = loadConfig(
    { ...settings, CONSOLE_TOKEN: TOKEN, CONSOLE_SESSION_SECRET: SESSION_SECRET, ...AUTH_LIMITS_OFF },
    'console',
  );
  const clients = new Map<string, PlatformClient>(
    config.merchants.map((m) => [
      m.ref,
      createPlatformClient({ baseUrl: m.platformBaseUrl!, merchantNo: m.merchantNo, timeoutMs: 2000 }),
    ]),
  );
  const redis = createRedis(env.redisUrl, 'producer');
  const queues = merchantQueues(
    config.merchants,
    env.prefix,
    (name, prefix) => new Queue(name, { connection: redis, prefix }),
  );
  const app = await buildApp({
    config,
    db: env.db,
    platform: clients.get('a')!,
    platforms: clients,
    logger: createLogger({ name: 'merchants-console', level: 'silent' }),
    redis,
    queues,
    ...(opts.operators ? { operators: opts.operators } : {}),
    replayDriver: false,
    ...opts.consoleDeps,
  });
  if (opts.listen) await app.listen({ host: '127.0.0.1', port: 0 });
  else await app.ready();

  return {
    app,
    url: opts.listen ? `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` : '',
    config,
    merchants: {
      a: { ref: 'a', merchantNo: merchantNos.a, platform: platforms.a },
      b: { ref: 'b', merchantNo: merchantNos.b, platform: platforms.b },
    },
    clients,
    redis,
    queues,
    settings,
    async close() {
      await app.close();
      await Promise.all(queues.list.map((q) => q.queue.close()));
      await Promise.all([...clients.values()].map((c) => c.close()));
      redis.disconnect();
      await Promise.all(REFS.map((ref) => platforms[ref].close()));
      file.remove();
    },
  };
}
