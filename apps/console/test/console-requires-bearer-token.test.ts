import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { orders } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { useTestEnv } from '@mcb/testkit';
import { buildApp } from '../src/app.ts';
import { AUTH, startConsole, startFakePlatform, TOKEN, type TestConsole } from './helpers/fake-platform.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let console_: TestConsole;

/** Every route the console serves, with a request that would otherwise be valid. */
const ROUTES: { method: 'GET' | 'POST' | 'PUT'; url: string; payload?: unknown }[] = [
  { method: 'POST', url: '/api/payins', payload: { merchantOrderNo: 'A1', currency: 'PHP', amount: '10' } },
  {
    method: 'POST',
    url: '/api/payouts',
    payload: { merchantOrderNo: 'B1', currency: 'PHP', amount: '10', paymentMethod: 1, params: {} },
  },
  {
    method: 'POST',
    url: '/api/payouts/validate',
    payload: { currency: 'PHP', amount: '10', paymentMethod: 1, params: {} },
  },
  { method: 'GET', url: '/api/orders/A1' },
  { method: 'GET', url: '/api/payment-methods' },
  { method: 'POST', url: '/api/payment-methods/refresh' },
  { method: 'GET', url: '/api/openapi.json' },
  { method: 'GET', url: '/api/reviews' },
  { method: 'POST', url: '/api/reviews/A1/reverify' },
  { method: 'POST', url: '/api/reviews/A1/dismiss', payload: { note: 'x' } },
  { method: 'GET', url: '/api/events' },
  { method: 'GET', url: '/api/callbacks?orderNo=A1' },
  { method: 'POST', url: '/api/reconcile' },
  { method: 'POST', url: '/api/merchants/A1/pause', payload: { reason: 'x' } },
  { method: 'POST', url: '/api/merchants/A1/resume', payload: { reason: 'x' } },
  { method: 'GET', url: '/api/audit' },
  { method: 'GET', url: '/api/whoami' },
  { method: 'GET', url: '/api/merchants' },
  { method: 'GET', url: '/api/merchants/A1/minutes' },
  { method: 'GET', url: '/merchants' },
  { method: 'GET', url: '/merchants/A1' },
  { method: 'GET', url: '/search?q=A1' },
  { method: 'GET', url: '/orders/A1' },
  { method: 'GET', url: '/reviews' },
  { method: 'POST', url: '/reviews/1/reverify', payload: { reason: 'x' } },
  { method: 'POST', url: '/reviews/1/dismiss', payload: { reason: 'x' } },
  { method: 'GET', url: '/audit' },
  { method: 'POST', url: '/api/replays', payload: { filter: { status: 'failed' }, dryRun: true } },
  { method: 'GET', url: '/api/replays' },
  { method: 'GET', url: '/api/replays/A1' },
  { method: 'POST', url: '/api/replays/A1/cancel', payload: { reason: 'x' } },
  { method: 'POST', url: '/api/orders/A1/jobs/A1/replay', payload: { reason: 'x' } },
  { method: 'GET', url: '/replays' },
  { method: 'GET', url: '/replays/new?dryRun=1&status=failed' },
  { method: 'POST', url: '/replays', payload: { reason: 'x' } },
  { method: 'GET', url: '/replays/1' },
  { method: 'POST', url: '/replays/1/cancel', payload: { reason: 'x' } },
  { method: 'GET', url: '/queues' },
  { method: 'GET', url: '/queues/api/queues' },
  { method: 'PUT', url: '/queues/api/queues/callbacks/retry/failed' },
  { method: 'GET', url: '/api/no-such-route' },
  { method: 'GET', url: '/' },
  // A path parameter longer than the router accepts: authentication still answers first (not 414).
  { method: 'GET', url: `/api/orders/${'x'.repeat(150)}` },
];

beforeAll(async () => {
  platform = await startFakePlatform();
  console_ = await startConsole({
    db: env.db,
    databaseUrl: env.databaseUrl,
    baseUrl: platform.baseUrl,
    redis: { url: env.redisUrl, prefix: env.prefix },
  });
});

afterAll(async () => {
  await console_?.close();
  await platform?.stop();
});

describe('console bearer authentication', () => {
  it.each([
    ['no Authorization header', undefined],
    ['a wrong token', `Bearer ${TOKEN}x`],
    ['a token prefix', `Bearer ${TOKEN.slice(0, -1)}`],
    ['another scheme', `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}`],
    ['the bare token', TOKEN],
    ['an empty bearer', 'Bearer '],
  ])('answers 401 on every route, known or not, with %s', async (_what, authorization) => {
    for (const route of ROUTES) {
      const res = await console_.app.inject({
        method: route.method,
        url: route.url,
        payload: route.payload as object,
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(res.statusCode, `${route.method} ${route.url}`).toBe(401);
      expect(res.json()).toMatchObject({ code: 'UNAUTHORIZED' });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="console"');
    }
    // Nothing was registered and the platform was never asked.
    expect(await env.db.db.select().from(orders)).toEqual([]);
    expect(platform.state.requests).toEqual([]);
  });

  it('lists every documented route in the test above, so a new route cannot skip it', async () => {
    const doc = (await console_.app.inject({ method: 'GET', url: '/api/openapi.json', headers: AUTH })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{[^}]+\}/g, 'X')}`),
    );
    expect(documented.length).toBeGreaterThanOrEqual(6);
    const tested = ROUTES.map((r) => `${r.method} ${r.url.replace(/\/A1(?=\/|\?|$)/g, '/X').replace(/\?.*$/, '')}`);
    for (const route of documented) expect(tested).toContain(route);
  });

  it('lets the right token through, whatever the case of the scheme', async () => {
    for (const authorization of [`Bearer ${TOKEN}`, `bearer ${TOKEN}`]) {
      const res = await console_.app.inject({ method: 'GET', url: '/api/orders/none', headers: { authorization } });
      expect(res.statusCode).toBe(404);
    }
  });

  it('answers an authenticated request with an over-long path parameter in the uniform error shape', async () => {
    const res = await console_.app.inject({ method: 'GET', url: `/api/orders/${'x'.repeat(150)}`, headers: AUTH });
    expect(res.statusCode).toBe(414);
    expect(res.json()).toMatchObject({ code: 'REQUEST_INVALID' });
  });

  it('covers routes registered after buildApp returned', async () => {
    const config = loadConfig(
      {
        MERCHANT_NO: 'M100',
        PLATFORM_BASE_URL: platform.baseUrl,
        PLATFORM_ALLOW_HTTP: 'true',
        CONSOLE_TOKEN: TOKEN,
        LOG_LEVEL: 'silent',
      },
      'console',
    );
    const app = await buildApp({
      config,
      db: env.db,
      platform: console_.platform,
      logger: createLogger({ name: 't', level: 'silent' }),
    });
    try {
      await app.register(async (child) => {
        child.get('/queues', async () => 'dashboard');
      });
      expect((await app.inject({ method: 'GET', url: '/queues' })).statusCode).toBe(401);
      expect((await app.inject({ method: 'GET', url: '/queues', headers: AUTH })).body).toBe('dashboard');
    } finally {
      await app.close();
    }
  });

  it('refuses to build without CONSOLE_TOKEN', async () => {
    const config = loadConfig({ LOG_LEVEL: 'silent' }, 'cli');
    await expect(
      buildApp({
        config,
        db: env.db,
        platform: console_.platform,
        logger: createLogger({ name: 't', level: 'silent' }),
      }),
    ).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  });
});
