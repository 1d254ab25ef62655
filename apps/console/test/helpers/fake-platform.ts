import type { AddressInfo } from 'node:net';
import { createCatalogCache, type CatalogCache } from '@mcb/core/catalog';
import { loadConfig } from '@mcb/core/config';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { Queue } from 'bullmq';
import type { Db } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { MERCHANT_NO, startFakePlatform as startPlatformDouble, type CatalogMode, type TestEnv } from '@mcb/testkit';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import type { OperatorEntry } from '../../src/operators/directory.ts';

export const TOKEN = 'test-console-token-0123456789abcdef';
export const AUTH = { authorization: `Bearer ${TOKEN}` };

/** The console's session key (CONSOLE_SESSION_SECRET) in these tests. */
export const SESSION_SECRET = 'test-console-session-secret-0123456789abcdef';

/** The catalog the local platform serves: every kind of method, a bank list, a ReDoS-prone pattern. */
export const WIRE_CATALOG = {
  currencies: [
    {
      currency: 'PHP',
      symbol: '₱',
      decimals: 2,
      methods: [
        {
          paymentMethod: 1,
          name: 'Bank transfer',
          kind: 'bank',
          fields: [
            {
              key: 'accountName',
              apiParam: 'accountName',
              label: 'Account name',
              required: true,
              pattern: '',
              hint: '',
            },
            {
              key: 'accountNo',
              apiParam: 'bankAccount',
              label: 'Account number',
              required: true,
              pattern: '^[0-9]{10,16}$',
              hint: '10 to 16 digits',
            },
            { key: 'bank', apiParam: 'bankName', label: 'Bank', required: true, pattern: '', hint: '' },
          ],
          banks: [
            { name: 'BDO Unibank', code: 'BDO' },
            { name: 'Metrobank', code: 'MBT' },
          ],
        },
        {
          paymentMethod: 2,
          name: 'GCash',
          kind: 'wallet',
          fields: [
            {
              key: 'mobile',
              apiParam: 'accountNo',
              label: 'Mobile',
              required: true,
              pattern: '(a+)+$',
              hint: 'evil pattern',
            },
          ],
        },
        {
          paymentMethod: 3,
          name: 'QR Ph',
          kind: 'qrcode',
          fields: [{ key: 'idPhoto', apiParam: '', label: 'ID photo', required: true, pattern: '', hint: '' }],
        },
      ],
    },
    { currency: 'JPY', symbol: '¥', decimals: 0, methods: [] },
  ],
};

export type PlatformMode = CatalogMode;

/**
 * These tests send wrong tokens on purpose, far more than the failed-authentication limit allows from one address;
 * the limit itself has its own test (console-locks-out-repeated-failed-authentication).
 */
export const AUTH_LIMITS_OFF = { CONSOLE_AUTH_MAX_FAILURES: '1000000', CONSOLE_AUTH_MAX_FAILURES_GLOBAL: '1000000' };

/** The tests' platform double serving {@link WIRE_CATALOG}: `state.mode` scripts getPaymentMethods' answer. */
export async function startFakePlatform() {
  const double = await startPlatformDouble({ currencies: WIRE_CATALOG.currencies });
  let closed = false;
  return {
    state: double.catalog,
    baseUrl: double.url,
    /** Stop listening: later requests get ECONNREFUSED, as when the platform is down. */
    async stop() {
      if (closed) return;
      closed = true;
      await double.close();
    },
  };
}

export interface TestConsole {
  app: FastifyInstance;
  /** The console's base URL (http://127.0.0.1:port) when started with `listen`, else an empty string. */
  url: string;
  platform: PlatformClient;
  catalog: CatalogCache;
  close(): Promise<void>;
}

/** buildApp against this file's database and a platform at `baseUrl`, with a controllable clock for the cache. */
export async function startConsole(opts: {
  db: Db;
  databaseUrl: string;
  baseUrl: string;
  now?: () => number;
  freshForMs?: number;
  /** With Redis and a prefix, the console also serves the dashboard and POST /api/reconcile. */
  redis?: { url: string; prefix: string };
  /** Operators besides CONSOLE_TOKEN's admin (see OPERATORS in operators.ts of these helpers). */
  operators?: readonly OperatorEntry[];
  /** Further settings (CONSOLE_AUTH_PROXY_HEADER, ...). */
  env?: Record<string, string>;
  /** Listen on a free port of 127.0.0.1 (for the CLI or a browser) rather than answer `inject` only. @defaultValue false */
  listen?: boolean;
}): Promise<TestConsole> {
  const config = loadConfig(
    {
      // The tests' one merchant: the orders testkit's createOrder writes, and rows written without a merchant, are its.
      MERCHANT_NO,
      PLATFORM_BASE_URL: opts.baseUrl,
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: TOKEN,
      CONSOLE_SESSION_SECRET: SESSION_SECRET,
      DATABASE_URL: opts.databaseUrl,
      LOG_LEVEL: 'silent',
      ...AUTH_LIMITS_OFF,
      ...opts.env,
    },
    'console',
  );
  const logger = createLogger({ name: 'console-test', level: 'silent' });
  const platform = createPlatformClient({ baseUrl: opts.baseUrl, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
  const catalog = createCatalogCache({ db: opts.db.db, platform, logger, now: opts.now, freshForMs: opts.freshForMs });
  const redis = opts.redis ? createRedis(opts.redis.url, 'worker') : undefined;
  const queue =
    opts.redis && redis ? new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: opts.redis.prefix }) : undefined;
  const app = await buildApp({
    config,
    db: opts.db,
    platform,
    logger,
    catalog,
    redis,
    queue,
    operators: opts.operators,
  });
  if (opts.listen) await app.listen({ host: '127.0.0.1', port: 0 });
  else await app.ready();
  return {
    app,
    url: opts.listen ? `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` : '',
    platform,
    catalog,
    async close() {
      await app.close();
      await platform.close();
      await queue?.close();
      redis?.disconnect();
    },
  };
}

/**
 * {@link startConsole} on `env`'s database against a platform double of its own ({@link startFakePlatform}), for tests
 * that need the console only; `close()` stops both.
 */
export async function startConsoleWithPlatform(
  env: Pick<TestEnv, 'db' | 'databaseUrl'>,
  opts: Omit<Parameters<typeof startConsole>[0], 'db' | 'databaseUrl' | 'baseUrl'> = {},
): Promise<TestConsole> {
  const double = await startFakePlatform();
  try {
    const c = await startConsole({ ...opts, db: env.db, databaseUrl: env.databaseUrl, baseUrl: double.baseUrl });
    return {
      ...c,
      async close() {
        await c.close();
        await double.stop();
      },
    };
  } catch (e) {
    await double.stop();
    throw e;
  }
}
