import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createCatalogCache, type CatalogCache } from '@mcb/core/catalog';
import { loadConfig } from '@mcb/core/config';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { Queue } from 'bullmq';
import type { Db } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';

export const TOKEN = 'test-console-token-0123456789abcdef';
export const AUTH = { authorization: `Bearer ${TOKEN}` };

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
            { key: 'accountName', apiParam: 'accountName', label: 'Account name', required: true, pattern: '', hint: '' },
            { key: 'accountNo', apiParam: 'bankAccount', label: 'Account number', required: true, pattern: '^[0-9]{10,16}$', hint: '10 to 16 digits' },
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
          fields: [{ key: 'mobile', apiParam: 'accountNo', label: 'Mobile', required: true, pattern: '(a+)+$', hint: 'evil pattern' }],
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

export type PlatformMode = { kind: 'ok' } | { kind: 'code'; code: number; message: string } | { kind: 'http'; status: number };

/** A local platform over HTTP: getPaymentMethods answers per `mode`; every request body is recorded. */
export async function startFakePlatform() {
  const state = { mode: { kind: 'ok' } as PlatformMode, requests: [] as Record<string, string>[] };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = (raw ? JSON.parse(raw) : {}) as Record<string, string>;
      state.requests.push(body);
      const mode = state.mode;
      if (req.url !== '/api/open/order/getPaymentMethods') return void res.writeHead(404).end();
      if (mode.kind === 'http') return void res.writeHead(mode.status).end('unavailable');
      const reply =
        mode.kind === 'code'
          ? { code: mode.code, message: mode.message, data: null }
          : {
              code: 0,
              message: 'success',
              data: { currencies: WIRE_CATALOG.currencies.filter((c) => !body.currencyType || c.currency === body.currencyType) },
            };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closed = false;
  return {
    state,
    baseUrl,
    /** Stop listening: later requests get ECONNREFUSED, as when the platform is down. */
    async stop() {
      if (closed) return;
      closed = true;
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

export interface TestConsole {
  app: FastifyInstance;
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
}): Promise<TestConsole> {
  const config = loadConfig(
    { MERCHANT_NO: 'M100', PLATFORM_BASE_URL: opts.baseUrl, CONSOLE_TOKEN: TOKEN, DATABASE_URL: opts.databaseUrl, LOG_LEVEL: 'silent' },
    'console',
  );
  const logger = createLogger({ name: 'console-test', level: 'silent' });
  const platform = createPlatformClient({ baseUrl: opts.baseUrl, merchantNo: 'M100', timeoutMs: 2000 });
  const catalog = createCatalogCache({ db: opts.db, platform, logger, now: opts.now, freshForMs: opts.freshForMs });
  const redis = opts.redis ? createRedis(opts.redis.url, 'worker') : undefined;
  const queue = opts.redis && redis ? new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: opts.redis.prefix }) : undefined;
  const app = await buildApp({ config, db: opts.db, platform, logger, catalog, redis, queue });
  await app.ready();
  return {
    app,
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
