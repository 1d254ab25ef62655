import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERCHANT_NO, useTestEnv } from '@mcb/testkit';
import { AUTH, startConsole, startFakePlatform, WIRE_CATALOG, type TestConsole } from './helpers/fake-platform.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;
let clock = Date.parse('2026-03-01T10:00:00Z');

beforeAll(async () => {
  platform = await startFakePlatform();
  c = await startConsole({
    db: env.db,
    databaseUrl: env.databaseUrl,
    baseUrl: platform.baseUrl,
    now: () => clock,
    freshForMs: 60_000,
  });
});

afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

const get = (url: string) => c.app.inject({ method: 'GET', url, headers: AUTH });

// The steps build on each other: fetch, narrow, platform errors, then the platform goes away for good.
describe('GET /api/payment-methods', () => {
  it('1. answers 503 CATALOG_UNAVAILABLE when nothing is cached and the platform answers 503', async () => {
    platform.state.mode = { kind: 'http', status: 503 };
    const res = await get('/api/payment-methods');
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'CATALOG_UNAVAILABLE' });
    platform.state.mode = { kind: 'ok' };
  });

  it('2. answers 502 MERCHANT_UNKNOWN, with the platform code, when the platform does not know our merchant number (40010)', async () => {
    platform.state.mode = { kind: 'code', code: 40010, message: 'merchant does not exist' };
    try {
      const res = await get('/api/payment-methods?currency=PHP');
      expect(res.statusCode).toBe(502);
      expect(res.json()).toMatchObject({
        code: 'MERCHANT_UNKNOWN',
        platformCode: 40010,
        platformMessage: 'merchant does not exist',
      });
      expect(res.json().message).toMatch(/MERCHANT_NO/);
    } finally {
      platform.state.mode = { kind: 'ok' };
    }
  });

  it('2. answers 422 CURRENCY_NOT_ENABLED naming the currency when the platform says 40017, and says the same from its memory', async () => {
    platform.state.mode = { kind: 'code', code: 40017, message: 'illegal currency' };
    try {
      const res = await get('/api/payment-methods?currency=PHP');
      expect(res.statusCode).toBe(422);
      expect(res.json()).toMatchObject({
        code: 'CURRENCY_NOT_ENABLED',
        platformCode: 40017,
        platformMessage: 'illegal currency',
      });
      expect(res.json().message).toMatch(/currency PHP is not enabled for this merchant/);
    } finally {
      platform.state.mode = { kind: 'ok' };
    }
    // Within the freshness window the refusal is remembered: same answer, platform not asked again.
    platform.state.requests = [];
    const again = await get('/api/payment-methods?currency=PHP');
    expect(again.statusCode).toBe(422);
    expect(again.json()).toMatchObject({ code: 'CURRENCY_NOT_ENABLED', platformCode: 40017 });
    expect(platform.state.requests).toEqual([]);
  });

  it('3. serves the catalog as the platform returned it, with its age', async () => {
    const res = await get('/api/payment-methods');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      ...WIRE_CATALOG,
      fetchedAt: new Date(clock).toISOString(),
      ageSeconds: 0,
      stale: false,
    });
    expect(res.headers.age).toBe('0');
  });

  it('4. narrows to one currency', async () => {
    clock += 5_000;
    const res = await get('/api/payment-methods?currency=JPY');
    expect(res.json()).toMatchObject({ currencies: [WIRE_CATALOG.currencies[1]], ageSeconds: 5, stale: false });
    expect((await get('/api/payment-methods?currency=php')).statusCode).toBe(400);
  });

  it('4. answers 422 CURRENCY_NOT_ENABLED, never an empty catalog, for a currency the platform does not list', async () => {
    const res = await get('/api/payment-methods?currency=XXX');
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({ code: 'CURRENCY_NOT_ENABLED' });
    expect(res.json().message).toMatch(/currency XXX is not enabled/);
  });

  it('5. asks the platform with currencyType once the copy is old, and refreshes on demand', async () => {
    clock += 120_000;
    platform.state.requests = [];
    const res = await get('/api/payment-methods?currency=PHP');
    expect(res.json()).toMatchObject({ currencies: [{ currency: 'PHP' }], ageSeconds: 0, stale: false });
    expect(platform.state.requests).toEqual([{ merchantNo: MERCHANT_NO, currencyType: 'PHP' }]);
    const refreshed = await c.app.inject({
      method: 'POST',
      url: '/api/payment-methods/refresh',
      headers: AUTH,
      payload: { reason: 'catalog changed upstream' },
    });
    expect(refreshed.statusCode).toBe(200);
    expect(refreshed.json().currencies).toHaveLength(2);
  });

  it('6. with the platform down, serves the cached catalog and says how old it is', async () => {
    await platform.stop();
    clock += 2 * 3600_000;
    const res = await get('/api/payment-methods');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ currencies: WIRE_CATALOG.currencies, ageSeconds: 7200, stale: true });
    expect(res.headers.age).toBe('7200');
    expect(res.headers['x-catalog-stale']).toBe('true');
    // An on-demand refresh has no fallback: the operator sees the platform is down.
    const refresh = await c.app.inject({
      method: 'POST',
      url: '/api/payment-methods/refresh',
      headers: AUTH,
      payload: { reason: 'catalog changed upstream' },
    });
    expect(refresh.statusCode).toBe(503);
    expect(refresh.json()).toMatchObject({
      code: 'PLATFORM_UNREACHABLE',
      message: 'the platform is unreachable; retry later',
    });
    expect(refresh.body).not.toContain('127.0.0.1');
  });
});

describe('GET /api/openapi.json', () => {
  it('documents the routes from the zod schemas, with bearer security', async () => {
    const res = await get('/api/openapi.json');
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.components.securitySchemes.bearer).toEqual({ type: 'http', scheme: 'bearer' });
    const payouts = doc.paths['/api/payouts'].post;
    expect(Object.keys(payouts.responses)).toEqual(expect.arrayContaining(['201', '200', '409', '422', '502', '503']));
    expect(payouts.requestBody.content['application/json'].schema.required).toEqual(
      expect.arrayContaining(['merchantOrderNo', 'currency', 'amount', 'paymentMethod', 'params']),
    );
    expect(doc.paths['/api/orders/{merchantOrderNo}'].get.parameters[0]).toMatchObject({
      in: 'path',
      name: 'merchantOrderNo',
    });
    expect(doc.paths['/api/openapi.json']).toBeUndefined();
  });
});
