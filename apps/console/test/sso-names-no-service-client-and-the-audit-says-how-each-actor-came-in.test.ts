import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '@mcb/testkit';
import { startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';
import { bearer, OPERATORS, SERVICE, TOKENS } from './helpers/operators.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;

const PROXY = { CONSOLE_AUTH_PROXY_HEADER: 'X-Forwarded-Email', CONSOLE_TRUSTED_PROXIES: '10.9.0.0/16' };
const SAME_ORIGIN = { origin: 'http://console.test', host: 'console.test' };

beforeAll(async () => {
  platform = await startFakePlatform();
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'operators-')), 'operators.json');
  writeFileSync(file, JSON.stringify([...OPERATORS, SERVICE]));
  c = await startConsole({
    db: env.db,
    databaseUrl: env.databaseUrl,
    baseUrl: platform.baseUrl,
    env: { ...PROXY, CONSOLE_OPERATORS_FILE: file },
  });
});
afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

describe('the SSO header names people only', () => {
  it("a trusted proxy naming a service client's entry is refused (403); its token still works", async () => {
    const res = await c.app.inject({
      method: 'GET',
      url: '/api/whoami',
      headers: { 'x-forwarded-email': SERVICE.name },
      remoteAddress: '10.9.3.4',
    });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'FORBIDDEN', message: expect.stringContaining('service client') });
    const byToken = await c.app.inject({ method: 'GET', url: '/api/whoami', headers: bearer('service') });
    expect(byToken.json()).toMatchObject({ name: SERVICE.name, role: 'service', via: 'bearer' });
  });
});

describe('the audit says how each actor came in', () => {
  it('bearer, session and proxy rows each carry their way in', async () => {
    // 1. A viewer by token, refused: a denied row.
    const byToken = await c.app.inject({
      method: 'POST',
      url: '/api/reviews/9001/dismiss',
      headers: bearer('viewer'),
      payload: { reason: 'try' },
    });
    expect(byToken.statusCode).toBe(403);
    // 2. An operator by session: the review does not exist, a failed row.
    const login = await c.app.inject({
      method: 'POST',
      url: '/login',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...SAME_ORIGIN },
      payload: new URLSearchParams({ token: TOKENS.operator, next: '/search' }).toString(),
    });
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const bySession = await c.app.inject({
      method: 'POST',
      url: '/api/reviews/9002/dismiss',
      headers: { cookie, ...SAME_ORIGIN },
      payload: { reason: 'by session' },
    });
    expect(bySession.statusCode).toBe(404);
    // 3. An operator through the SSO proxy.
    const byProxy = await c.app.inject({
      method: 'POST',
      url: '/api/reviews/9003/dismiss',
      headers: { 'x-forwarded-email': 'sso.only@example.com', ...SAME_ORIGIN },
      remoteAddress: '10.9.3.4',
      payload: { reason: 'by sso' },
    });
    expect(byProxy.statusCode).toBe(404);

    const audit = await c.app.inject({
      method: 'GET',
      url: '/api/audit?action=reviews.dismiss',
      headers: bearer('admin'),
    });
    const rows = (audit.json() as { entries: { target: string; operator: string; via: string | null }[] }).entries;
    expect(rows.map((r) => [r.target, r.operator, r.via]).sort()).toEqual([
      ['review:9001', 'vera.viewer@example.com', 'bearer'],
      ['review:9002', 'otto.operator@example.com', 'session'],
      ['review:9003', 'sso.only@example.com', 'proxy'],
    ]);
  });
});
