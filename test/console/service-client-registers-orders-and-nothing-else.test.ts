import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorActions, orders } from '@mcb/core/db';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv } from '@mcb/testkit';
import { count, eq } from 'drizzle-orm';
import { routesOf, serviceMayCall } from '../../apps/console/src/operators/service-gate.ts';
import { ACTIONS, can, type Action } from '../../apps/console/src/operators/roles.ts';
import { bearer, OPERATORS, SERVICE } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let redis: Redis;

beforeAll(async () => {
  redis = createRedis(env.redisUrl, 'producer');
  stack = await startOpsStack(env, { consoleDeps: { operators: [...OPERATORS, SERVICE], redis } });
});
afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

const auditRows = async () => (await env.db.db.select({ n: count() }).from(operatorActions))[0]!.n;
/** Routes anyone reaches without credentials (they check the token themselves). */
const isOpen = (url: string) => url === '/login' || url === '/logout' || url.startsWith('/assets/');
/** A concrete URL for a route pattern: every parameter `1`, a wildcard `x`. */
const concrete = (url: string) => url.replace(/:\w+/g, '1').replace(/\*$/, 'x');

describe('a service client (the shop registering orders)', () => {
  it('may read and register orders, and nothing else in the action table', () => {
    const allowed = (Object.keys(ACTIONS) as Action[]).filter((a) => can('service', a));
    expect(allowed.sort()).toEqual(['orders.register', 'read']);
  });

  it('registers a pay-in without a reason (201, then 200 for the repeat), recorded with its name and no reason', async () => {
    const body = { merchantOrderNo: 'SVC-1', currency: 'PHP', amount: '10.00' };
    const first = await stack.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: bearer('service'),
      payload: body,
    });
    expect(first.statusCode, first.body).toBe(201);
    const again = await stack.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: bearer('service'),
      payload: { ...body, reason: '  ' },
    });
    expect(again.statusCode, again.body).toBe(200);
    expect(await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'SVC-1'))).toHaveLength(1);
    const rows = await env.db.db.select().from(operatorActions).where(eq(operatorActions.target, 'order:SVC-1'));
    expect(rows.map((r) => ({ operator: r.operator, role: r.role, action: r.action, reason: r.reason }))).toEqual([
      { operator: 'shop-orders', role: 'service', action: 'orders.register', reason: '' },
      { operator: 'shop-orders', role: 'service', action: 'orders.register', reason: '' },
    ]);
    // A reason it does give is checked like anyone's.
    const bidi = await stack.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: bearer('service'),
      payload: { ...body, merchantOrderNo: 'SVC-2', reason: 'ok \u202e' },
    });
    expect(bidi.statusCode).toBe(400);
  });

  it('reaches the payout registration without a reason (the catalog decides, not the role)', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api/payouts',
      headers: bearer('service'),
      payload: { merchantOrderNo: 'SVC-P1', currency: 'PHP', amount: '10', paymentMethod: 1, params: {} },
    });
    expect([403, 400]).not.toContain(res.statusCode);
  });

  it('people still give a reason to register an order', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: bearer('operator'),
      payload: { merchantOrderNo: 'SVC-3', currency: 'PHP', amount: '1' },
    });
    expect(res.json()).toMatchObject({ code: 'REASON_REQUIRED' });
  });

  it('gets 403 for every other route of the console (every action, page, the dashboard), and changes nothing', async () => {
    const routes = routesOf(stack.app).filter((r) => !isOpen(r.url));
    // The table covers the API, the pages, bull-board and the replays (a refactor that hid routes from it fails here).
    for (const expected of [
      'POST /api/reviews/:id/reverify',
      'POST /api/reconcile',
      'POST /api/payment-methods/refresh',
      'POST /api/replays',
      'GET /search',
      'GET /queues',
    ]) {
      expect(routes.map((r) => `${r.method} ${r.url}`)).toContain(expected);
    }
    const refused = routes.filter((r) => !serviceMayCall(r.method, r.url));
    expect(refused.filter((r) => r.method !== 'GET' && r.method !== 'HEAD').length).toBeGreaterThan(10);
    const rowsBefore = await auditRows();
    for (const r of refused) {
      const res = await stack.app.inject({
        method: r.method as 'GET',
        url: concrete(r.url),
        headers: { ...bearer('service'), 'x-reason': 'the shop', accept: 'text/html' },
        ...(r.method === 'GET' || r.method === 'HEAD'
          ? {}
          : { payload: { reason: 'the shop', merchantOrderNo: 'SVC-X' } }),
      });
      expect(res.statusCode, `${r.method} ${r.url}`).toBe(403);
      if (r.method !== 'HEAD')
        expect(res.json(), `${r.method} ${r.url}`).toMatchObject({
          code: 'FORBIDDEN',
          message: expect.stringContaining('service client'),
        });
    }
    // Unknown paths too.
    expect(
      (await stack.app.inject({ method: 'DELETE', url: '/api/orders', headers: bearer('service') })).statusCode,
    ).toBe(403);
    expect(await auditRows()).toBe(rowsBefore);
  });

  it('reads the API (GET), and whoami says what it may do', async () => {
    const who = await stack.app.inject({ method: 'GET', url: '/api/whoami?actions=true', headers: bearer('service') });
    expect(who.json()).toEqual({
      name: 'shop-orders',
      role: 'service',
      via: 'bearer',
      may: ['read', 'orders.register'],
    });
    const order = await stack.app.inject({ method: 'GET', url: '/api/orders/SVC-1', headers: bearer('service') });
    expect(order.statusCode).toBe(200);
  });

  it('cannot log in to the pages', async () => {
    const origin = 'http://localhost';
    const res = await stack.app.inject({
      method: 'POST',
      url: '/login',
      headers: { origin, host: 'localhost', 'content-type': 'application/x-www-form-urlencoded' },
      payload: `token=${encodeURIComponent('shop-service-token-0123456789ab')}&next=%2F`,
    });
    expect(res.statusCode).toBe(403);
    expect(res.headers['set-cookie']).toBeUndefined();
    expect(res.body).toContain('service client');
  });

  it("stays out of the people's audit view unless asked for (API; the page and the CLI send the same filter)", async () => {
    const audit = async (q: string) =>
      (
        (await stack.app.inject({ method: 'GET', url: `/api/audit${q}`, headers: bearer('admin') })).json() as {
          entries: { operator: string; role: string }[];
        }
      ).entries;
    await stack.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: bearer('operator'),
      payload: { merchantOrderNo: 'SVC-4', currency: 'PHP', amount: '1', reason: 'by hand' },
    });
    const people = await audit('');
    expect(people.length).toBeGreaterThan(0);
    expect(people.some((e) => e.role === 'service')).toBe(false);
    expect((await audit('?services=show')).some((e) => e.role === 'service')).toBe(true);
    const only = await audit('?services=only');
    expect(only.length).toBeGreaterThan(0);
    expect(only.every((e) => e.role === 'service')).toBe(true);
    expect((await audit('?operator=shop-orders')).length).toBe(only.length);
    const page = await stack.app.inject({ method: 'GET', url: '/audit?services=only', headers: bearer('admin') });
    expect(page.body).toContain('shop-orders');
    expect((await stack.app.inject({ method: 'GET', url: '/audit', headers: bearer('admin') })).body).not.toContain(
      'shop-orders',
    );
  });
});
