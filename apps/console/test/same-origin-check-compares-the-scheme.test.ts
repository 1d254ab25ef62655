import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '@mcb/testkit';
import { startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';
import { OPERATORS, TOKENS } from './helpers/operators.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;
let cookie: string;
const PROXY = '10.9.0.7';

beforeAll(async () => {
  platform = await startFakePlatform();
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'operators-')), 'operators.json');
  writeFileSync(file, JSON.stringify(OPERATORS));
  c = await startConsole({
    db: env.db,
    databaseUrl: env.databaseUrl,
    baseUrl: platform.baseUrl,
    env: { CONSOLE_OPERATORS_FILE: file, CONSOLE_TRUSTED_PROXIES: PROXY },
  });
  const login = await c.app.inject({
    method: 'POST',
    url: '/login',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      origin: 'http://console.test',
      host: 'console.test',
    },
    payload: new URLSearchParams({ token: TOKENS.operator, next: '/search' }).toString(),
  });
  cookie = String(login.headers['set-cookie']).split(';')[0]!;
});
afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

/** A session's dismiss of a review that does not exist: 404 once past the CSRF check, 403 when refused by it. */
const dismiss = (headers: Record<string, string>, remoteAddress = '127.0.0.1') =>
  c.app.inject({
    method: 'POST',
    url: '/api/reviews/424242/dismiss',
    headers: { cookie, host: 'console.test', ...headers },
    remoteAddress,
    payload: { reason: 'scheme check' },
  });

describe('the same-origin check compares the scheme as well as the host', () => {
  it('over plain http: an http Origin passes, an https Origin of the same host is another origin (403)', async () => {
    expect((await dismiss({ origin: 'http://console.test' })).statusCode).toBe(404);
    const https = await dismiss({ origin: 'https://console.test' });
    expect(https.statusCode).toBe(403);
    expect(https.json()).toMatchObject({ code: 'FORBIDDEN', message: expect.stringContaining('cross-origin') });
  });

  it('behind a trusted TLS proxy: the https Origin passes, a page over plain http on the same host is refused', async () => {
    const tls = { 'x-forwarded-proto': 'https' };
    expect((await dismiss({ ...tls, origin: 'https://console.test' }, PROXY)).statusCode).toBe(404);
    expect((await dismiss({ ...tls, origin: 'http://console.test' }, PROXY)).statusCode).toBe(403);
    // The header from anyone else says nothing: the request came over http.
    expect((await dismiss({ ...tls, origin: 'https://console.test' }, '10.9.0.8')).statusCode).toBe(403);
  });
});
