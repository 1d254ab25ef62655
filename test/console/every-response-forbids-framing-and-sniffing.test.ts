import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reviews } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { bearer, OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

/** Issue 43's low rows: framing and sniffing headers on every response, `back` after normalisation, what a viewer sees. */
const env = useTestEnv();
let stack: OpsStack;
const cookies: Partial<Record<keyof typeof TOKENS, string>> = {};
const SAME_ORIGIN = { origin: 'http://console.test', host: 'console.test' };

async function loginAs(role: keyof typeof TOKENS) {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/login',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...SAME_ORIGIN },
    payload: new URLSearchParams({ token: TOKENS[role], next: '/search' }).toString(),
  });
  expect(res.statusCode).toBe(303);
  return String(res.headers['set-cookie']).split(';')[0]!;
}

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true, consoleDeps: { operators: OPERATORS } });
  cookies.viewer = await loginAs('viewer');
  cookies.operator = await loginAs('operator');
});
afterAll(async () => {
  await stack?.close();
});

function expectProtected(res: { headers: Record<string, unknown> }, what: string) {
  expect(res.headers['x-frame-options'], what).toBe('DENY');
  expect(res.headers['x-content-type-options'], what).toBe('nosniff');
  const csp = String(res.headers['content-security-policy'] ?? '');
  expect(csp, what).toMatch(/(^|;\s*)frame-ancestors 'none'(;|$)/);
  expect(csp.match(/frame-ancestors/g), what).toHaveLength(1);
}

describe('every response forbids framing and sniffing', () => {
  it('console pages, bull-board, the login and 401 pages, error pages and refusals carry the headers', async () => {
    const html = { accept: 'text/html' };
    const cases: [string, { method: 'GET' | 'POST' | 'PUT'; url: string; headers: Record<string, string> }, number][] =
      [
        ['a console page', { method: 'GET', url: '/search', headers: { cookie: cookies.viewer!, ...html } }, 200],
        ['the dashboard page', { method: 'GET', url: '/queues', headers: { cookie: cookies.viewer!, ...html } }, 200],
        [
          'the dashboard page, encoded path',
          { method: 'GET', url: '/%71ueues/queue/callbacks', headers: { cookie: cookies.viewer!, ...html } },
          200,
        ],
        ['the dashboard API', { method: 'GET', url: '/queues/api/queues', headers: bearer('viewer') }, 200],
        ['board-guard.js', { method: 'GET', url: '/assets/board-guard.js', headers: bearer('viewer') }, 200],
        ['the login page', { method: 'GET', url: '/login', headers: html }, 200],
        ['the 401 page', { method: 'GET', url: '/queues', headers: html }, 401],
        ['the JSON 401', { method: 'GET', url: '/api/reviews', headers: {} }, 401],
        [
          'an HTML 404 page',
          { method: 'GET', url: '/no-such-page', headers: { cookie: cookies.viewer!, ...html } },
          404,
        ],
        ['an HTML 400 page', { method: 'GET', url: '/orders/%20', headers: { cookie: cookies.viewer!, ...html } }, 400],
        [
          'a dashboard refusal',
          { method: 'PUT', url: '/queues/api/queues/callbacks/pause', headers: bearer('operator') },
          403,
        ],
        // Answered by fastify's frameworkErrors (before routing, so before the route's hooks): a malformed URL.
        ['the 401 page of a malformed URL', { method: 'GET', url: '/%c0%afqueues', headers: html }, 401],
        ['the JSON 401 of a malformed URL', { method: 'GET', url: '/%u0071ueues', headers: {} }, 401],
        ['a malformed URL', { method: 'GET', url: '/%u0071ueues/api/queues', headers: bearer('viewer') }, 400],
        [
          'a path parameter over its limit',
          { method: 'GET', url: `/api/orders/${'a'.repeat(1000)}`, headers: bearer('viewer') },
          414,
        ],
      ];
    for (const [what, req, status] of cases) {
      const res = await stack.app.inject(req);
      expect(res.statusCode, what).toBe(status);
      expectProtected(res, what);
    }
  });

  it("requests Node's HTTP parser refuses before fastify (headers too large: 431; unparseable: 400) carry them too", async () => {
    await stack.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = stack.app.server.address() as AddressInfo;
    /** One raw request; what came back before the console closed the connection. */
    const raw = (request: string) =>
      new Promise<string>((resolve) => {
        let out = '';
        const socket = connect(port, '127.0.0.1', () => socket.write(request));
        socket.on('data', (d: Buffer) => (out += d.toString()));
        socket.on('error', () => undefined);
        socket.on('close', () => resolve(out));
      });
    const cases: [string, string, number][] = [
      ['headers over 16 KiB', `GET /search HTTP/1.1\r\nHost: c\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
      ['a header without its colon', 'GET /search HTTP/1.1\r\nHost c\r\n\r\n', 400],
    ];
    for (const [what, request, status] of cases) {
      const reply = await raw(request);
      const [head = '', body = ''] = reply.split('\r\n\r\n');
      expect(head.split('\r\n')[0], what).toBe(
        `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}`,
      );
      const headers = Object.fromEntries(
        head
          .split('\r\n')
          .slice(1)
          .map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      expectProtected({ headers }, what);
      expect(headers.connection, what).toBe('close');
      expect(JSON.parse(body), what).toMatchObject({ code: 'REQUEST_INVALID' });
    }
  });

  it("merges frame-ancestors into a page's own policy instead of replacing it (the board keeps running its scripts)", async () => {
    const page = await stack.app.inject({
      method: 'GET',
      url: '/search',
      headers: { cookie: cookies.viewer!, accept: 'text/html' },
    });
    expect(page.headers['content-security-policy']).toMatch(/default-src 'none'.*frame-ancestors 'none'/);
    const board = await stack.app.inject({
      method: 'GET',
      url: '/queues',
      headers: { cookie: cookies.viewer!, accept: 'text/html' },
    });
    expect(board.headers['content-security-policy']).toBe("frame-ancestors 'none'");
  });
});

describe("a form's `back` is checked after normalisation", () => {
  it.each([
    '/.//evil.example/x',
    '//evil.example/x',
    '/\\evil.example/x',
    '/%2e//evil.example/x',
    '/x/..//evil.example/x',
    'https://evil.example/x',
  ])('never redirects to another host for back=%s', async (back) => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/reviews/999/dismiss',
      headers: { cookie: cookies.operator!, ...SAME_ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ reason: 'test', back }).toString(),
    });
    expect(res.statusCode).toBe(303);
    const location = String(res.headers.location);
    expect(location).toMatch(/^\/(?![/\\])/);
    expect(new URL(location, 'http://console.test').host).toBe('console.test');
  });

  it('keeps a local back as it is', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/reviews/999/dismiss',
      headers: { cookie: cookies.operator!, ...SAME_ORIGIN, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ reason: 'test', back: '/reviews?status=open' }).toString(),
    });
    expect(String(res.headers.location)).toMatch(/^\/reviews\?status=open&error=/);
  });
});

describe("what a viewer sees of a review's stored event", () => {
  it("a viewer gets the order numbers, state and findings, not the event's amounts, merchant number or pay time; an operator gets them", async () => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '123.45' });
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '99.00' }));
    await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '123.45' }));
    await waitFor(
      async () => (await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo)))[0],
    );
    type Event = {
      merchantNo: string | null;
      fiatAmount: string | null;
      quantity: string | null;
      payTime: string | null;
      state: number | null;
      hash: string;
    };
    const list = async (headers: Record<string, string>) => {
      const res = await stack.app.inject({
        method: 'GET',
        url: `/api/reviews?merchantOrderNo=${merchantOrderNo}`,
        headers,
      });
      expect(res.statusCode).toBe(200);
      return { body: res.body, events: (res.json() as { reviews: { events: Event[] }[] }).reviews[0]!.events };
    };
    const viewer = await list(bearer('viewer'));
    expect(viewer.events.length).toBeGreaterThan(0);
    for (const e of viewer.events) {
      expect(e).toMatchObject({ merchantNo: null, fiatAmount: null, quantity: null, payTime: null, state: 6 });
      expect(e.hash).toMatch(/^[0-9a-f]{64}$/);
    }
    // The event's own fields are gone (what verification found, its reason, is ours and stays).
    for (const value of ['17.3', '2025-01-02T03:04:05', 'M100200']) expect(viewer.body).not.toContain(value);
    const operator = await list(bearer('operator'));
    expect(operator.events[0]).toMatchObject({ fiatAmount: '123.45', quantity: '17.3', merchantNo: 'M100200' });
    // The page a viewer opens shows no more than the API gives them.
    const page = await stack.app.inject({
      method: 'GET',
      url: `/reviews?merchantOrderNo=${merchantOrderNo}`,
      headers: { cookie: cookies.viewer!, accept: 'text/html' },
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(merchantOrderNo);
    for (const value of ['17.3', '2025-01-02T03:04:05', 'M100200']) expect(page.body).not.toContain(value);
  });
});
