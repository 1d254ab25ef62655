import type net from 'node:net';
import { generateKeyPair } from '@mcb/core/callback';
import { loadConfig } from '@mcb/core/config';
import { operatorActions } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry, Registry } from '@mcb/core/metrics';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import { freePort, useTestEnv } from '@mcb/testkit';
import { desc, eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
// The sandbox is the platform here, through its package entry (a dev dependency of the console).
import { buildApp as buildSandbox } from '@mcb/sandbox';
import { merchantKeys } from '@mcb/core/queue';

const MERCHANT_NO = 'M300400';
const TOKEN = 'reconcile-console-token-0123456789';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const env = useTestEnv();
let sandbox: Awaited<ReturnType<typeof buildSandbox>>;
let platform: PlatformClient;
let redis: Redis;
let app: FastifyInstance;
const registry = createMetricsRegistry('console-reconcile-test');
// The merchant's own registry, as main.ts gives each merchant one (createConsolePlatforms): its sweeps' series there.
const merchantRegistry = new Registry();
merchantRegistry.setDefaultLabels({ app: 'console', merchant: 'default' });
const logger = createLogger({ name: 'console-reconcile-test', level: 'silent' });
let closedPort: number;

function config(extra: Record<string, string> = {}) {
  return loadConfig(
    {
      MERCHANT_NO,
      PLATFORM_BASE_URL: 'http://127.0.0.1:1',
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: TOKEN,
      QUEUE_PREFIX: env.prefix,
      // Orders registered a moment ago are in the window; the sandbox answers fast, so no need to be polite.
      RECONCILE_MIN_AGE: '0ms',
      RECONCILE_RATE: '200',
      LOG_LEVEL: 'silent',
      ...extra,
    },
    'console',
  );
}

beforeAll(async () => {
  closedPort = await freePort();
  sandbox = await buildSandbox({
    merchantNo: MERCHANT_NO,
    merchantPublicKeyPem: generateKeyPair().publicKeyPem,
    timeScale: 100_000,
  });
  await sandbox.listen({ port: 0, host: '127.0.0.1' });
  const { port } = sandbox.server.address() as net.AddressInfo;
  platform = createPlatformClient({ baseUrl: `http://127.0.0.1:${port}`, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
  redis = createRedis(env.redisUrl, 'producer');
  app = await buildApp({
    config: config(),
    db: env.db,
    platform,
    logger,
    registry,
    merchantRegistries: new Map([['default', merchantRegistry]]),
    redis,
  });
});
afterAll(async () => {
  await app?.close();
  await sandbox?.close();
  await platform?.close();
  redis?.disconnect();
});

const reconcile = (target = app, headers: Record<string, string> = AUTH) =>
  target.inject({
    method: 'POST',
    url: '/api/reconcile',
    headers,
    payload: { reason: 'customer says paid, no credit' },
  });

describe('POST /api/reconcile', () => {
  it('runs a sweep now: a pay-in whose callbacks never arrived is credited, and the report says so', async () => {
    // 1. Our order, and the platform's: released, its callback sent to a port nobody listens on.
    const reg = await app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: AUTH,
      payload: { merchantOrderNo: 'RC-1', currency: 'INR', amount: '1000.10', reason: 'test' },
    });
    expect(reg.statusCode).toBe(201);
    sandbox.sandbox.createPayin({
      merchantOrderNo: 'RC-1',
      currency: 'INR',
      amount: '1000.10',
      callbackUrl: `http://127.0.0.1:${closedPort}/callbacks/payin`,
    });
    sandbox.sandbox.finalize('RC-1', 6);
    // A pending one the platform never finalises, and one it never heard of.
    await app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: AUTH,
      payload: { merchantOrderNo: 'RC-2', currency: 'INR', amount: '5', reason: 'test' },
    });
    sandbox.sandbox.createPayin({ merchantOrderNo: 'RC-2', currency: 'INR', amount: '5' });
    await app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: AUTH,
      payload: { merchantOrderNo: 'RC-3', currency: 'INR', amount: '7', reason: 'test' },
    });

    // 2. The sweep.
    const res = await reconcile();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      scanned: 3,
      recovered: { credited: 1, succeeded: 0, refused: 0 },
      stillPending: 1,
      unknown: 1,
      // Named, so an operator can act on them without reading logs.
      orders: { stillPending: ['RC-2'], unknown: ['RC-3'] },
      reviews: 0,
      errors: 0,
      stoppedEarly: false,
      stopReason: null,
      durationMs: expect.any(Number),
    });

    // 3. The order view shows the credit; the metric counts it.
    const view = (await app.inject({ method: 'GET', url: '/api/orders/RC-1', headers: AUTH })).json();
    expect(view).toMatchObject({
      status: 'credited',
      platformOrderNo: sandbox.sandbox.get('RC-1').orderNo,
      ledger: [{ entryType: 'payin_credit', amount: '1000.1' }],
    });
    expect((await app.inject({ method: 'GET', url: '/api/orders/RC-2', headers: AUTH })).json()).toMatchObject({
      status: 'pending',
      ledger: [],
      review: null,
    });
    expect(await merchantRegistry.getSingleMetricAsString('mcb_reconcile_recovered_total')).toMatch(
      /kind="payin",outcome="credited",app="console",merchant="default"} 1/,
    );
    expect(registry.getSingleMetric('mcb_reconcile_recovered_total')).toBeUndefined();

    // 4. Again: nothing more to recover.
    expect((await reconcile()).json()).toMatchObject({ scanned: 2, recovered: { credited: 0 } });

    // 5. Each sweep is in the audit trail: who, why, and what it found.
    const [last] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.action, 'reconcile.run'))
      .orderBy(desc(operatorActions.id))
      .limit(1);
    expect(last).toMatchObject({
      operator: 'admin',
      role: 'admin',
      target: 'sweep',
      reason: 'customer says paid, no credit',
      outcome: 'completed',
    });
    expect(last!.details).toMatchObject({ scanned: 2, stillPending: 1, unknown: 1 });
  });

  it('answers 409 RECONCILE_IN_PROGRESS while another sweep holds the lock, and sweeps once it is free', async () => {
    await redis.set(merchantKeys(env.prefix).sweepLock, 'a-worker-sweeping', 'PX', 10_000);
    try {
      const res = await reconcile();
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: 'RECONCILE_IN_PROGRESS', requestId: expect.any(String) });
    } finally {
      await redis.del(merchantKeys(env.prefix).sweepLock);
    }
    expect((await reconcile()).statusCode).toBe(200);
  });

  it('answers 503 RECONCILE_UNAVAILABLE without internals when Redis is unreachable', async () => {
    const deadRedis = createRedis(`redis://127.0.0.1:${closedPort}`, 'producer');
    deadRedis.on('error', () => {});
    const offline = await buildApp({ config: config(), db: env.db, platform, logger, redis: deadRedis });
    try {
      const res = await reconcile(offline);
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('30');
      expect(res.json()).toMatchObject({ code: 'RECONCILE_UNAVAILABLE' });
      expect(res.body).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|stack/);
    } finally {
      await offline.close();
      deadRedis.disconnect();
    }
  });

  it('requires the bearer token', async () => {
    const res = await reconcile(app, {});
    expect(res.statusCode).toBe(401);
    expect(await redis.exists(merchantKeys(env.prefix).sweepLock)).toBe(0);
  });
});
