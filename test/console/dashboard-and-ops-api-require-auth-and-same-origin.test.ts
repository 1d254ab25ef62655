import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reviews } from '@mcb/core/db';
import { createRedis } from '@mcb/core/redis';
import { payinEvent, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { UnrecoverableError, Worker } from 'bullmq';
import { createSessionCodec, SESSION_COOKIE } from '../../apps/console/src/session/session-cookie.ts';
import { sha256Hex } from '../../apps/console/src/operators/directory.ts';
import { browserHeaders, login, SESSION_SECRET, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let jobId: string;

beforeAll(async () => {
  stack = await startOpsStack(env); // no worker: jobs stay where the test puts them
  const no = uid();
  jobId = await stack.add(payinEvent({ orderNo: `P-${no}`, merchantOrderNo: `MO-${no}`, fiatAmount: '5.00' }));
  await failWaitingJobs();
});

/** Run the waiting jobs through a worker that fails them for good, so the test has a failed job to aim at. */
async function failWaitingJobs() {
  const connection = createRedis(env.redisUrl, 'worker');
  const worker = new Worker(
    'callbacks',
    async () => {
      throw new UnrecoverableError('PLATFORM_HTTP_ERROR: scripted');
    },
    { connection, prefix: env.prefix },
  );
  try {
    await waitFor(async () => (await stateOf()) === 'failed', { message: 'job did not fail' });
  } finally {
    await worker.close();
    await connection.quit();
  }
}
afterAll(async () => {
  await stack?.close();
});

const stateOf = async () => (await stack.queue.getJob(jobId))!.getState();

/** Dashboard and ops API routes, each with a request that would change something or reveal something. */
const ROUTES = () => [
  { method: 'GET' as const, url: '/queues/api/queues?activeQueue=callbacks&status=failed' },
  { method: 'GET' as const, url: `/queues/api/queues/callbacks/${jobId}` },
  { method: 'PUT' as const, url: `/queues/api/queues/callbacks/${jobId}/retry` },
  { method: 'PUT' as const, url: '/queues/api/queues/callbacks/retry/failed' },
  { method: 'PUT' as const, url: `/queues/api/queues/callbacks/${jobId}/clean` },
  { method: 'GET' as const, url: '/api/reviews' },
  { method: 'POST' as const, url: '/api/reviews/1/reverify', payload: {} },
  { method: 'POST' as const, url: '/api/reviews/1/dismiss', payload: { note: 'x' } },
  { method: 'GET' as const, url: '/api/events' },
  { method: 'GET' as const, url: '/api/callbacks?orderNo=X' },
];

describe('authentication of the dashboard and the ops API', () => {
  it.each([
    ['nothing', {}],
    ['a wrong bearer token', { authorization: `Bearer ${TOKEN}x` }],
    [
      'a forged session cookie',
      {
        cookie: `${SESSION_COOKIE}=v3.9999999999.YWRtaW4.AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.${'A'.repeat(43)}`,
      },
    ],
    [
      'a session signed with another key',
      {
        cookie: `${SESSION_COOKIE}=${createSessionCodec({ secret: 'another-secret-0123456789' }).issue('admin', sha256Hex(TOKEN)).value}`,
      },
    ],
    [
      'a session signed with the admin token',
      { cookie: `${SESSION_COOKIE}=${createSessionCodec({ secret: TOKEN }).issue('admin', sha256Hex(TOKEN)).value}` },
    ],
    [
      'an expired session',
      {
        cookie: `${SESSION_COOKIE}=${createSessionCodec({ secret: SESSION_SECRET, now: () => Date.now() - 5 * 3600_000 }).issue('admin', sha256Hex(TOKEN)).value}`,
      },
    ],
  ])('answers 401 with %s and changes nothing', async (_what, headers) => {
    await env.db.db
      .insert(reviews)
      .values({
        kind: 'payin',
        orderNo: 'R1',
        state: 6,
        merchantOrderNo: 'MO-R1',
        reasonCode: 'VERIFY_AMOUNT_MISMATCH',
        reason: 'r',
        event: {},
      })
      .onConflictDoNothing();
    for (const route of ROUTES()) {
      const res = await stack.app.inject({
        method: route.method,
        url: route.url,
        payload: route.payload,
        headers: { ...headers, origin: 'http://console.test', host: 'console.test' },
      });
      expect(res.statusCode, `${route.method} ${route.url}`).toBe(401);
      expect(res.json()).toMatchObject({ code: 'UNAUTHORIZED' });
    }
    expect(await stateOf()).toBe('failed');
    expect((await env.db.db.select().from(reviews)).every((r) => r.status === 'open')).toBe(true);
  });

  it('sends a browser opening /queues without a session a 401 page that links to the login form', async () => {
    const res = await stack.app.inject({
      method: 'GET',
      url: '/queues/queue/callbacks?status=failed',
      headers: { accept: 'text/html,application/xhtml+xml' },
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.body).toContain('href="/login?next=%2Fqueues%2Fqueue%2Fcallbacks%3Fstatus%3Dfailed"');
  });

  it('logs in with the token: an HttpOnly, SameSite=Strict cookie, Secure when configured; a wrong token gets no cookie', async () => {
    const form = (token: string, next = '/queues') => new URLSearchParams({ token, next }).toString();
    const post = (payload: string, app = stack.app) =>
      app.inject({
        method: 'POST',
        url: '/login',
        payload,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: 'http://console.test',
          host: 'console.test',
        },
      });

    const wrong = await post(form('not-the-token-at-all'));
    expect(wrong.statusCode).toBe(401);
    expect(wrong.headers['set-cookie']).toBeUndefined();

    const ok = await post(form(TOKEN, '//evil.example/x'));
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/');
    const setCookie = String(ok.headers['set-cookie']);
    expect(setCookie).toMatch(new RegExp(`^${SESSION_COOKIE}=v3\\.`));
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Strict');
    expect(setCookie).toContain('Max-Age=14400');
    expect(setCookie).not.toContain('Secure');

    const secureStack = await startOpsStack(env, { consoleDeps: { cookieSecure: 'always', sessionTtlMs: 600_000 } });
    try {
      const res = await post(form(TOKEN), secureStack.app);
      expect(String(res.headers['set-cookie'])).toMatch(/Max-Age=600;.*HttpOnly; SameSite=Strict; Secure$/);
    } finally {
      await secureStack.close();
    }

    const crossSite = await stack.app.inject({
      method: 'POST',
      url: '/login',
      payload: form(TOKEN),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        origin: 'http://evil.example',
        host: 'console.test',
      },
    });
    expect(crossSite.statusCode).toBe(403);
    expect(crossSite.headers['set-cookie']).toBeUndefined();
  });

  it('refuses cookie-authenticated actions that do not come from the console itself (CSRF), and lets bearer callers act', async () => {
    const cookie = await login(stack.app);
    const url = `/queues/api/queues/callbacks/${jobId}/retry`;
    for (const headers of [
      { cookie, origin: 'http://evil.example', host: 'console.test' },
      { cookie, origin: 'null', host: 'console.test' },
      { cookie, host: 'console.test', 'sec-fetch-site': 'cross-site' },
      { cookie, host: 'console.test' },
    ]) {
      const res = await stack.app.inject({ method: 'PUT', url, headers });
      expect(res.statusCode, JSON.stringify(headers)).toBe(403);
      expect(res.json()).toMatchObject({ code: 'FORBIDDEN' });
    }
    expect(await stateOf()).toBe('failed');

    // Reading with the cookie needs no Origin; acting with it from the same origin works.
    expect((await stack.app.inject({ method: 'GET', url: '/queues/api/queues', headers: { cookie } })).statusCode).toBe(
      200,
    );
    const same = await stack.app.inject({
      method: 'PUT',
      url,
      headers: { cookie, host: 'console.test', 'sec-fetch-site': 'same-origin', 'x-reason': 'cause fixed' },
    });
    expect(same.statusCode).toBe(204);
    expect(await stateOf()).toBe('waiting');
    await failWaitingJobs();
  });

  it('refuses dashboard actions that edit or destroy queue state, even for an authenticated operator', async () => {
    const cookie = await login(stack.app);
    const h = browserHeaders(cookie);
    const before = await stack.queue.getJobCounts();
    const refused = [
      { method: 'PUT' as const, url: `/queues/api/queues/callbacks/${jobId}/clean` },
      {
        method: 'PATCH' as const,
        url: `/queues/api/queues/callbacks/${jobId}/update-data`,
        payload: { data: { fiatAmount: '1' } },
      },
      { method: 'POST' as const, url: '/queues/api/queues/callbacks/add', payload: { name: 'payin', data: {} } },
      { method: 'PUT' as const, url: '/queues/api/queues/callbacks/empty' },
      { method: 'PUT' as const, url: '/queues/api/queues/callbacks/obliterate', payload: {} },
      { method: 'PUT' as const, url: '/queues/api/queues/callbacks/pause' },
      { method: 'PUT' as const, url: '/queues/api/queues/callbacks/clean/failed' },
      { method: 'PUT' as const, url: '/queues/api/queues/callbacks/retry/completed' },
    ];
    for (const r of refused) {
      const res = await stack.app.inject({ ...r, headers: h });
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(403);
    }
    expect(await stack.queue.getJobCounts()).toEqual(before);
    expect(await stack.queue.isPaused()).toBe(false);
  });

  it('shows job data through the formatter: order numbers and state, never amounts or the merchant number', async () => {
    const res = await stack.app.inject({
      method: 'GET',
      url: `/queues/api/queues/callbacks/${jobId}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.statusCode).toBe(200);
    const { job } = res.json() as { job: { data: Record<string, unknown> } };
    expect(Object.keys(job.data).sort()).toEqual([
      'hiddenFields',
      'kind',
      'merchantOrderNo',
      'orderNo',
      'receivedAt',
      'source',
      'state',
    ]);
    expect(res.body).not.toContain('5.00');
    expect(res.body).not.toContain('17.3');
  });

  it('serves the dashboard page and its assets to a logged-in browser', async () => {
    const cookie = await login(stack.app);
    const page = await stack.app.inject({ method: 'GET', url: '/queues', headers: { cookie, accept: 'text/html' } });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<title>Callbacks</title>');
  });
});
