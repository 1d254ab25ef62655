import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '@mcb/testkit';
import { sha256Hex } from '../src/operators/directory.ts';
import { createSessionCodec, SESSION_COOKIE } from '../src/session/session-cookie.ts';
import { SESSION_SECRET, startConsole, startFakePlatform, TOKEN, type TestConsole } from './helpers/fake-platform.ts';
import { OPERATORS, TOKENS } from './helpers/operators.ts';

/**
 * Issue 43: a session is something only this console mints (its key is never derived from a bearer token), that
 * ends at the latest when its lifetime does, when its operator's token is rotated or removed, and at logout.
 */
const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
const consoles: TestConsole[] = [];
const SAME_ORIGIN = { origin: 'http://console.test', host: 'console.test' };

const start = async (operators = OPERATORS, extra: Record<string, string> = {}) => {
  const c = await startConsole({
    db: env.db,
    databaseUrl: env.databaseUrl,
    baseUrl: platform.baseUrl,
    operators,
    env: extra,
  });
  consoles.push(c);
  return c;
};

beforeAll(async () => {
  platform = await startFakePlatform();
});
afterAll(async () => {
  for (const c of consoles) await c.close();
  await platform?.stop();
});

async function login(c: TestConsole, token: string) {
  const res = await c.app.inject({
    method: 'POST',
    url: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...SAME_ORIGIN },
    payload: new URLSearchParams({ token, next: '/search' }).toString(),
  });
  expect(res.statusCode).toBe(303);
  return String(res.headers['set-cookie']).split(';')[0]!;
}

const whoami = async (c: TestConsole, cookie: string) => {
  const res = await c.app.inject({ method: 'GET', url: '/api/whoami', headers: { cookie } });
  return { status: res.statusCode, name: (res.json() as { name?: string }).name };
};
const cookieOf = (value: string) => `${SESSION_COOKIE}=${value}`;
const HUNDRED_YEARS = 100 * 365 * 24 * 3600_000;

describe('a session only the console can mint', () => {
  it('refuses a session signed with a key derived from CONSOLE_TOKEN, naming any operator', async () => {
    // No CONSOLE_SESSION_SECRET (the operators passed in, not by file): before issue 43 the key was then CONSOLE_TOKEN's.
    const c = await start(OPERATORS, { CONSOLE_SESSION_SECRET: '' });
    for (const name of ['otto.operator@example.com', 'ada.admin@example.com', 'admin']) {
      const forged = createSessionCodec({ secret: TOKEN }).issue(
        name,
        sha256Hex(name === 'admin' ? TOKEN : TOKENS.operator),
      ).value;
      expect((await whoami(c, cookieOf(forged))).status, name).toBe(401);
    }
    // The console's own session works.
    expect(await whoami(c, await login(c, TOKENS.operator))).toEqual({
      status: 200,
      name: 'otto.operator@example.com',
    });
  });

  it("refuses to start when CONSOLE_SESSION_SECRET is a bearer token (CONSOLE_TOKEN or an operator's): its holder could mint any session", async () => {
    await expect(start(OPERATORS, { CONSOLE_SESSION_SECRET: TOKEN })).rejects.toThrow(
      /CONSOLE_SESSION_SECRET: .*bearer token/,
    );
    const longToken = 'olga-operator-token-0123456789abcdef-long';
    const team = [
      ...OPERATORS,
      { name: 'olga@example.com', role: 'operator' as const, tokenSha256: sha256Hex(longToken) },
    ];
    await expect(start(team, { CONSOLE_SESSION_SECRET: longToken })).rejects.toThrow(
      /CONSOLE_SESSION_SECRET: .*bearer token/,
    );
    // What such a console would have accepted: a session for another operator, signed by the token's holder.
    const c = await start(team);
    const forged = createSessionCodec({ secret: longToken }).issue(
      'otto.operator@example.com',
      sha256Hex(TOKENS.operator),
    ).value;
    expect((await whoami(c, cookieOf(forged))).status).toBe(401);
  });

  it('uses a random key per start without CONSOLE_SESSION_SECRET (CONSOLE_TOKEN only): a restart ends the sessions', async () => {
    const first = await start([], { CONSOLE_SESSION_SECRET: '' });
    const cookie = await login(first, TOKEN);
    expect((await whoami(first, cookie)).status).toBe(200);
    const second = await start([], { CONSOLE_SESSION_SECRET: '' });
    expect((await whoami(second, cookie)).status).toBe(401);
    const forged = createSessionCodec({ secret: TOKEN }).issue('admin', sha256Hex(TOKEN)).value;
    expect((await whoami(second, cookieOf(forged))).status).toBe(401);
  });

  it('refuses a session whose expiry lies beyond the session lifetime, even signed with the right key', async () => {
    const c = await start();
    const credential = sha256Hex(TOKENS.operator);
    const century = createSessionCodec({ secret: SESSION_SECRET, ttlMs: HUNDRED_YEARS }).issue(
      'otto.operator@example.com',
      credential,
    ).value;
    expect((await whoami(c, cookieOf(century))).status).toBe(401);
    const expired = createSessionCodec({ secret: SESSION_SECRET, now: () => Date.now() - 5 * 3600_000 }).issue(
      'otto.operator@example.com',
      credential,
    ).value;
    expect((await whoami(c, cookieOf(expired))).status).toBe(401);
    // Within the lifetime it is the console's own kind of session.
    const fresh = createSessionCodec({ secret: SESSION_SECRET }).issue('otto.operator@example.com', credential).value;
    expect((await whoami(c, cookieOf(fresh))).status).toBe(200);
  });
});

describe('a session that ends when it should', () => {
  it("ends when the operator's token is rotated in the operators file (and the console restarted), or when they are removed", async () => {
    const before = await start();
    const cookie = await login(before, TOKENS.operator);
    const viewerCookie = await login(before, TOKENS.viewer);
    expect((await whoami(before, cookie)).status).toBe(200);

    const rotated = OPERATORS.map((o) =>
      o.name === 'otto.operator@example.com' ? { ...o, tokenSha256: sha256Hex('otto-new-token-0123456789abcdef') } : o,
    );
    const after = await start(rotated);
    expect((await whoami(after, cookie)).status).toBe(401);
    // The old token is refused too, the new one works, and the others' sessions are untouched.
    expect(
      (
        await after.app.inject({
          method: 'GET',
          url: '/api/whoami',
          headers: { authorization: `Bearer ${TOKENS.operator}` },
        })
      ).statusCode,
    ).toBe(401);
    expect((await whoami(after, await login(after, 'otto-new-token-0123456789abcdef'))).status).toBe(200);
    expect(await whoami(after, viewerCookie)).toEqual({ status: 200, name: 'vera.viewer@example.com' });

    const removed = await start(OPERATORS.filter((o) => o.name !== 'vera.viewer@example.com'));
    expect((await whoami(removed, viewerCookie)).status).toBe(401);
  });

  it('ends at logout: the same cookie, sent again, is refused until it would have expired', async () => {
    const c = await start();
    const cookie = await login(c, TOKENS.operator);
    const other = await login(c, TOKENS.operator);
    const out = await c.app.inject({ method: 'POST', url: '/logout', headers: { cookie, ...SAME_ORIGIN } });
    expect(out.statusCode).toBe(303);
    expect(String(out.headers['set-cookie'])).toMatch(new RegExp(`^${SESSION_COOKIE}=; .*Max-Age=0`));
    expect((await whoami(c, cookie)).status).toBe(401);
    // Another console of the same deployment (same secret, same database) refuses it as well.
    expect((await whoami(await start(), cookie)).status).toBe(401);
    // Only that session ended: another login of the same operator goes on.
    expect((await whoami(c, other)).status).toBe(200);
  });

  it('refuses a logout posted from another origin: the session goes on and no cookie is cleared', async () => {
    const c = await start();
    const cookie = await login(c, TOKENS.operator);
    for (const headers of [
      { origin: 'http://evil.example', host: 'console.test' },
      { host: 'console.test', 'sec-fetch-site': 'cross-site' },
      { host: 'console.test' },
    ]) {
      const res = await c.app.inject({ method: 'POST', url: '/logout', headers: { cookie, ...headers } });
      expect(res.statusCode, JSON.stringify(headers)).toBe(403);
      expect(res.headers['set-cookie']).toBeUndefined();
    }
    expect((await whoami(c, cookie)).status).toBe(200);
  });
});

describe("the session cookie's Secure flag (CONSOLE_COOKIE_SECURE=auto)", () => {
  it('is set behind a trusted TLS proxy (X-Forwarded-Proto: https), and not when anyone else says https', async () => {
    const c = await start(OPERATORS, { CONSOLE_TRUSTED_PROXIES: '10.9.0.0/16', CONSOLE_COOKIE_SECURE: 'auto' });
    // The browser's Origin carries the scheme it reached us by (https only through the trusted TLS proxy).
    const post = (remoteAddress: string, proto?: string, scheme = 'http') =>
      c.app.inject({
        method: 'POST',
        url: '/login',
        remoteAddress,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          ...SAME_ORIGIN,
          origin: `${scheme}://console.test`,
          ...(proto ? { 'x-forwarded-proto': proto } : {}),
        },
        payload: new URLSearchParams({ token: TOKENS.operator, next: '/search' }).toString(),
      });
    const secure = async (remoteAddress: string, proto?: string, scheme?: string) => {
      const res = await post(remoteAddress, proto, scheme);
      expect(res.statusCode).toBe(303);
      return /;\s*Secure(;|$)/.test(String(res.headers['set-cookie']));
    };
    expect(await secure('10.9.1.2', 'https', 'https')).toBe(true);
    expect(await secure('10.9.1.2', 'http')).toBe(false);
    expect(await secure('10.9.1.2')).toBe(false);
    expect(await secure('192.168.7.7', 'https')).toBe(false);
  });
});
