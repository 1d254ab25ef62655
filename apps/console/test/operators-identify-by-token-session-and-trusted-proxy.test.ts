import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { useTestEnv } from '@mcb/testkit';
import { loadOperatorsFile, sha256Hex } from '../src/operators/directory.ts';
import { can } from '../src/operators/roles.ts';
import { createSessionCodec, SESSION_COOKIE } from '../src/session/session-cookie.ts';
import { AUTH, SESSION_SECRET, startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';
import { bearer, OPERATORS, TOKENS } from './helpers/operators.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;

const PROXY = { CONSOLE_AUTH_PROXY_HEADER: 'X-Forwarded-Email', CONSOLE_TRUSTED_PROXIES: '10.9.0.0/16, 127.0.0.2' };

beforeAll(async () => {
  platform = await startFakePlatform();
  // Through the real file, as main.ts runs it.
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'operators-')), 'operators.json');
  writeFileSync(file, JSON.stringify(OPERATORS));
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

const whoami = async (headers: Record<string, string>, remoteAddress = '127.0.0.1') => {
  const res = await c.app.inject({ method: 'GET', url: '/api/whoami', headers, remoteAddress });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
};

describe('who is asking', () => {
  it('names CONSOLE_TOKEN admin and each file operator by bearer token, with their role', async () => {
    expect(await whoami(AUTH)).toEqual({ status: 200, body: { name: 'admin', role: 'admin', via: 'bearer' } });
    expect(await whoami(bearer('viewer'))).toMatchObject({ body: { name: 'vera.viewer@example.com', role: 'viewer' } });
    expect(await whoami(bearer('operator'))).toMatchObject({
      body: { name: 'otto.operator@example.com', role: 'operator' },
    });
    expect((await whoami({ authorization: `Bearer ${TOKENS.viewer}x` })).status).toBe(401);
  });

  it('carries the operator in the session cookie set by POST /login', async () => {
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
    expect(login.statusCode).toBe(303);
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    expect(await whoami({ cookie })).toMatchObject({
      status: 200,
      body: { name: 'otto.operator@example.com', role: 'operator', via: 'session' },
    });

    // A validly signed session of someone no longer in the directory (removed from the file) lets nobody in.
    const removed = createSessionCodec({ secret: SESSION_SECRET }).issue(
      'gone@example.com',
      sha256Hex('gone-token'),
    ).value;
    expect((await whoami({ cookie: `${SESSION_COOKIE}=${removed}` })).status).toBe(401);
  });

  it('believes the SSO header only from a trusted proxy, takes the role from the file, and refuses a name not in it', async () => {
    const header = { 'x-forwarded-email': 'sso.only@example.com' };
    expect(await whoami(header, '10.9.3.4')).toMatchObject({
      status: 200,
      body: { name: 'sso.only@example.com', role: 'operator', via: 'proxy' },
    });
    expect(await whoami(header, '::ffff:127.0.0.2')).toMatchObject({ status: 200, body: { via: 'proxy' } });
    // From anywhere else the header is ignored: no identity at all.
    expect((await whoami(header, '10.8.0.1')).status).toBe(401);
    expect((await whoami({ 'x-forwarded-email': 'admin' }, '192.168.1.1')).status).toBe(401);
    // `admin` is CONSOLE_TOKEN's holder, not an entry of the file: a trusted proxy cannot name it either.
    expect(await whoami({ 'x-forwarded-email': 'admin' }, '10.9.3.4')).toMatchObject({
      status: 403,
      body: { code: 'FORBIDDEN' },
    });
    // A trusted proxy naming someone who is not an operator: authenticated but not admitted.
    const stranger = await whoami({ 'x-forwarded-email': 'mallory@example.com' }, '10.9.0.1');
    expect(stranger.status).toBe(403);
    expect(stranger.body).toMatchObject({ code: 'FORBIDDEN' });
  });
});

describe('roles', () => {
  it('viewer reads, operator also acts, admin also reads the audit of others and manages replays of others', () => {
    expect([can('viewer', 'read'), can('viewer', 'reviews.reverify'), can('viewer', 'audit.readOthers')]).toEqual([
      true,
      false,
      false,
    ]);
    expect([
      can('operator', 'reviews.reverify'),
      can('operator', 'replays.start'),
      can('operator', 'replays.cancelOthers'),
    ]).toEqual([true, true, false]);
    expect([
      can('admin', 'audit.readOthers'),
      can('admin', 'replays.cancelOthers'),
      can('admin', 'queue.retry'),
    ]).toEqual([true, true, true]);
  });
});

describe('configuration', () => {
  it('reads the operators file and names a bad entry', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'operators-'));
    const good = path.join(dir, 'good.json');
    writeFileSync(good, JSON.stringify([{ name: 'a@x', role: 'viewer', tokenSha256: sha256Hex('t'.repeat(20)) }]));
    expect(loadOperatorsFile(good)).toEqual([{ name: 'a@x', role: 'viewer', tokenSha256: sha256Hex('t'.repeat(20)) }]);
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify([{ name: 'a@x', role: 'root', tokenSha256: 'abc' }]));
    expect(() => loadOperatorsFile(bad)).toThrow(
      /CONSOLE_OPERATORS_FILE: .*\[0\.role\].*\[0\.tokenSha256\] expected the SHA-256/,
    );
    // `admin` is reserved for CONSOLE_TOKEN's holder: a file entry of that name is refused, in any case.
    const admin = path.join(dir, 'admin.json');
    writeFileSync(admin, JSON.stringify([{ name: 'Admin', role: 'viewer', tokenSha256: sha256Hex('t'.repeat(20)) }]));
    expect(() => loadOperatorsFile(admin)).toThrow(/\[0\.name\] the name admin is reserved/);
  });

  it('needs CONSOLE_TOKEN or an operators file, and a proxy header needs trusted addresses and the file', () => {
    const base = { MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'https://p' };
    expect(() => loadConfig(base, 'console')).toThrow(
      /CONSOLE_TOKEN: required for console \(or CONSOLE_OPERATORS_FILE/,
    );
    const secret = { CONSOLE_SESSION_SECRET: 's'.repeat(32) };
    expect(
      loadConfig({ ...base, ...secret, CONSOLE_OPERATORS_FILE: '/etc/ops.json' }, 'console').CONSOLE_TOKEN,
    ).toBeUndefined();
    // Operators' sessions need a key of their own: never CONSOLE_TOKEN, and not a random one per start.
    expect(() =>
      loadConfig({ ...base, CONSOLE_TOKEN: 'x'.repeat(16), CONSOLE_OPERATORS_FILE: '/etc/ops.json' }, 'console'),
    ).toThrow(/CONSOLE_SESSION_SECRET: required with CONSOLE_OPERATORS_FILE/);
    expect(() =>
      loadConfig({ ...base, CONSOLE_TOKEN: 'x'.repeat(16), CONSOLE_AUTH_PROXY_HEADER: 'X-Forwarded-Email' }, 'console'),
    ).toThrow(
      /CONSOLE_TRUSTED_PROXIES: required with CONSOLE_AUTH_PROXY_HEADER[\s\S]*CONSOLE_OPERATORS_FILE: required with CONSOLE_AUTH_PROXY_HEADER/,
    );
    expect(() =>
      loadConfig(
        { ...base, ...secret, CONSOLE_OPERATORS_FILE: '/f', CONSOLE_TRUSTED_PROXIES: '10.0.0.0/33,nope' },
        'console',
      ),
    ).toThrow(/CONSOLE_TRUSTED_PROXIES: expected IP addresses or CIDR blocks/);
  });
});
