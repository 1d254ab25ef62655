import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient } from '@mcb/core/platform';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { buildApp } from '../src/app.ts';
import { AUTH, TOKEN } from './helpers/fake-platform.ts';

// Failed authentication is limited per client address (10 per window by default) and globally; a locked address
// gets 429 with Retry-After even for the right token, other addresses are not slowed, and the lock ends with its
// window. The window is shortened to 3 s here so that its end can be observed.
const env = useTestEnv();
const lines: string[] = [];
let app: FastifyInstance;

beforeAll(async () => {
  const config = loadConfig(
    {
      MERCHANT_NO: 'M100',
      PLATFORM_BASE_URL: 'http://127.0.0.1:9',
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: TOKEN,
      CONSOLE_AUTH_FAILURE_WINDOW: '3s',
      CONSOLE_AUTH_MAX_FAILURES_GLOBAL: '25',
    },
    'console',
  );
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  const logger = createLogger({ name: 'console-test', level: 'info', destination });
  const platform = createPlatformClient({ baseUrl: 'http://127.0.0.1:9', merchantNo: 'M100', timeoutMs: 500 });
  app = await buildApp({ config, db: env.db, platform, logger });
});
afterAll(async () => {
  await app?.close();
});

const form = {
  'content-type': 'application/x-www-form-urlencoded',
  origin: 'http://console.test',
  host: 'console.test',
};
const loginFrom = (remoteAddress: string, token: string) =>
  app.inject({
    method: 'POST',
    url: '/login',
    remoteAddress,
    headers: form,
    payload: new URLSearchParams({ token, next: '/queues' }).toString(),
  });
const apiFrom = (remoteAddress: string, authorization: string) =>
  app.inject({ method: 'GET', url: '/api/reviews', remoteAddress, headers: { authorization } });

describe('failed authentication is rate limited', () => {
  it('refuses the 11th login from one address with 429 even with the right token, lets others through, and resets after the window', async () => {
    for (let i = 0; i < 10; i++) expect((await loginFrom('10.0.0.1', `wrong-${i}`)).statusCode).toBe(401);
    const locked = await loginFrom('10.0.0.1', TOKEN);
    expect(locked.statusCode).toBe(429);
    expect(Number(locked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(locked.headers['set-cookie']).toBeUndefined();
    // The bearer API from the same address is locked too; from elsewhere a valid token passes at once.
    expect((await apiFrom('10.0.0.1', `Bearer ${TOKEN}`)).statusCode).toBe(429);
    expect((await apiFrom('10.0.0.2', AUTH.authorization)).statusCode).toBe(200);
    expect((await loginFrom('10.0.0.2', TOKEN)).statusCode).toBe(303);

    // One warning for the lock-out, with the address, never the attempted tokens.
    const lockouts = lines.filter((l) => l.includes('authentication locked'));
    expect(lockouts).toHaveLength(1);
    expect(lockouts[0]).toContain('10.0.0.1');
    expect(lines.join('')).not.toMatch(/wrong-\d|test-console-token/);

    await waitFor(async () => (await loginFrom('10.0.0.1', TOKEN)).statusCode === 303, {
      timeoutMs: 15_000,
      intervalMs: 100,
      message: 'the lock never ended',
    });
  });

  it('counts wrong bearer tokens the same way: 10 are 401, the 11th is 429', async () => {
    for (let i = 0; i < 10; i++) expect((await apiFrom('10.0.1.1', `Bearer wrong-token-${i}`)).statusCode).toBe(401);
    const res = await apiFrom('10.0.1.1', `Bearer ${TOKEN}`);
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ code: 'AUTH_RATE_LIMITED' });
    // A request without any credential is not a guess: it is neither counted nor locked.
    expect((await app.inject({ method: 'GET', url: '/api/reviews', remoteAddress: '10.0.1.3' })).statusCode).toBe(401);
  });

  it('answers failures 429 beyond the global limit across addresses, while a valid token from a fresh address still passes', async () => {
    // Start in a fresh window: the previous test's lock (begun with the global window's failures) must be over.
    await waitFor(async () => (await apiFrom('10.0.1.1', AUTH.authorization)).statusCode === 200, {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    const statuses: number[] = [];
    for (let i = 1; i <= 30; i++) statuses.push((await apiFrom(`10.0.3.${i}`, `Bearer wrong-${i}`)).statusCode);
    expect(statuses.slice(0, 25).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(25).every((s) => s === 429)).toBe(true);
    expect((await apiFrom('10.0.4.1', AUTH.authorization)).statusCode).toBe(200);
  });
});
