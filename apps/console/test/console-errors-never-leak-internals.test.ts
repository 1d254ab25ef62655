import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogCache } from '@mcb/core/catalog';
import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry } from '@mcb/core/metrics';
import { createPlatformClient } from '@mcb/core/platform';
import { useTestEnv } from '@mcb/testkit';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import { AUTH, TOKEN } from './helpers/fake-platform.ts';

const env = useTestEnv();
const logger = createLogger({ name: 'console-test', level: 'silent' });
const config = loadConfig(
  { MERCHANT_NO: 'M100', PLATFORM_BASE_URL: 'http://127.0.0.1:9', PLATFORM_ALLOW_HTTP: 'true', CONSOLE_TOKEN: TOKEN },
  'console',
);
const platform = createPlatformClient({ baseUrl: 'http://127.0.0.1:9', merchantNo: 'M100', timeoutMs: 1000 });
// Port 1 refuses connections: a Postgres that is down.
const deadDb = createDb('postgres://postgres@127.0.0.1:1/none', { connectionTimeoutMs: 1000 });
const registry = createMetricsRegistry('console-test');

/** A catalog cache that fails the way a bug would: a plain Error with internals in its message. */
const brokenCatalog: CatalogCache = {
  get: async () => {
    throw new Error('select * from secret_table where password = hunter2');
  },
  refresh: async () => {
    throw new TypeError('Cannot read properties of undefined');
  },
};

let app: FastifyInstance;
let down: FastifyInstance;

beforeAll(async () => {
  app = await buildApp({ config, db: env.db, platform, logger, catalog: brokenCatalog, registry, bodyLimit: 1024 });
  down = await buildApp({ config, db: deadDb, platform, logger });
});

afterAll(async () => {
  await app?.close();
  await down?.close();
  await platform.close();
  await deadDb.close();
});

describe('console error boundary', () => {
  it('answers 500 INTERNAL_ERROR with only a request id for an unexpected error', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/payment-methods', headers: AUTH });
    expect(res.statusCode).toBe(500);
    const body = res.json();
    expect(body).toEqual({
      code: 'INTERNAL_ERROR',
      message: `internal error (request ${body.requestId})`,
      requestId: expect.any(String),
    });
    expect(res.body).not.toMatch(/secret|hunter2|stack/);
  });

  it('answers 503 DB_UNAVAILABLE when Postgres is down, without the connection details', async () => {
    const res = await down.inject({ method: 'GET', url: '/api/orders/X-1', headers: AUTH });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'DB_UNAVAILABLE' });
    expect(res.headers['retry-after']).toBe('5');
    expect(res.body).not.toContain('127.0.0.1');
  });

  it('answers 413 to a body over the limit and 415 to a non-JSON content type', async () => {
    const big = await app.inject({
      method: 'POST',
      url: '/api/payins',
      payload: { merchantOrderNo: 'A', currency: 'PHP', amount: '1', customerId: 'x'.repeat(2000) },
      headers: AUTH,
    });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toMatchObject({ code: 'REQUEST_INVALID' });
    const text = await app.inject({
      method: 'POST',
      url: '/api/payins',
      payload: 'a=1',
      headers: { ...AUTH, 'content-type': 'text/plain' },
    });
    expect(text.statusCode).toBe(415);
  });

  it('counts requests by route and status', async () => {
    await app.inject({ method: 'GET', url: '/api/orders/NONE', headers: AUTH });
    const text = await registry.metrics();
    expect(text).toMatch(
      /console_http_requests_total\{method="GET",route="\/api\/orders\/:merchantOrderNo",status="404",app="console-test"\} 1/,
    );
  });
});
