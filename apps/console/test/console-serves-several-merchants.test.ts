import { operatorActions, orders } from '@mcb/core/db';
import { useTestEnv, type FakePlatform } from '@mcb/testkit';
import { desc, eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH, WIRE_CATALOG } from './helpers/fake-platform.ts';
import { startMerchantsConsole, type MerchantsConsole } from './helpers/merchants-console.ts';

// Two merchants, each on a platform double of its own that knows only its number and serves its own catalog: A
// serves the tests' full catalog, B only JPY (so a PHP payout is valid for A and not for B).
const env = useTestEnv();
let stack: MerchantsConsole;
let platformA: FakePlatform;
let platformB: FakePlatform;
let app: FastifyInstance;

beforeAll(async () => {
  // A second merchant may reuse an order number once the single-merchant indexes are gone (the helper drops them).
  stack = await startMerchantsConsole(env, {
    catalogs: {
      a: WIRE_CATALOG.currencies,
      b: WIRE_CATALOG.currencies.filter((c) => c.currency === 'JPY'),
    },
    env: { RECONCILE_MIN_AGE: '0ms', RECONCILE_RATE: '200' },
  });
  ({ app } = stack);
  platformA = stack.merchants.a.platform;
  platformB = stack.merchants.b.platform;
});

afterAll(async () => {
  await stack?.close();
});

const post = (url: string, payload: object) =>
  app.inject({ method: 'POST', url, payload: { reason: 'test', ...payload }, headers: AUTH });
const get = (url: string) => app.inject({ method: 'GET', url, headers: AUTH });
const payin = (no: string, extra: object = {}) => ({
  merchantOrderNo: no,
  currency: 'PHP',
  amount: '100.00',
  ...extra,
});
const bankPayout = (no: string, merchant: string) => ({
  merchant,
  merchantOrderNo: no,
  currency: 'PHP',
  amount: '1500.50',
  paymentMethod: 1,
  params: { accountName: 'Juan Cruz', accountNo: '1234567890', bank: 'BDO Unibank' },
});

describe('order registration names the merchant', () => {
  it('two merchants registering the same number each get their own order, in their own name', async () => {
    const a = await post('/api/payins', payin('SAME-1', { merchant: 'a', amount: '100.00' }));
    const b = await post('/api/payins', payin('SAME-1', { merchant: 'b', amount: '250.00' }));
    expect([a.statusCode, b.statusCode]).toEqual([201, 201]);
    expect(a.json()).toMatchObject({ merchant: 'a', merchantOrderNo: 'SAME-1', amount: '100' });
    expect(b.json()).toMatchObject({ merchant: 'b', merchantOrderNo: 'SAME-1', amount: '250' });
    const rows = await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'SAME-1'));
    expect(rows.map((r) => [r.merchantNo, r.amount]).sort()).toEqual([
      ['M-A', '100'],
      ['M-B', '250'],
    ]);
    // The same body again is the same order of that merchant (200), not a conflict with the other's.
    const again = await post('/api/payins', payin('SAME-1', { merchant: 'b', amount: '250.00' }));
    expect(again.statusCode).toBe(200);
    const [audit] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.target, 'order:SAME-1'))
      .orderBy(desc(operatorActions.id))
      .limit(1);
    expect(audit?.details).toMatchObject({ merchant: 'b' });
  });

  it('without `merchant`, 400 naming the field; an unknown ref, 400 naming it; nothing is registered', async () => {
    const missing = await post('/api/payins', payin('NONE-1'));
    expect(missing.statusCode).toBe(400);
    expect(missing.json()).toMatchObject({ code: 'REQUEST_INVALID', message: expect.stringContaining('merchant') });
    const unknown = await post('/api/payins', payin('NONE-1', { merchant: 'zz' }));
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().message).toMatch(/merchant.*"zz"/);
    const payout = await post('/api/payouts', { ...bankPayout('NONE-1', 'a'), merchant: undefined });
    expect(payout.statusCode).toBe(400);
    expect(payout.json().message).toContain('merchant');
    expect(await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'NONE-1'))).toEqual([]);
  });
});

describe('GET /api/orders/:no with two merchants', () => {
  it('answers 409 MERCHANT_REQUIRED listing the refs when both hold the number, and each with ?merchant=', async () => {
    await post('/api/payins', payin('AMB-1', { merchant: 'a', amount: '10.00' }));
    await post('/api/payins', payin('AMB-1', { merchant: 'b', amount: '20.00' }));
    const ambiguous = await get('/api/orders/AMB-1');
    expect(ambiguous.statusCode).toBe(409);
    expect(ambiguous.json()).toMatchObject({ code: 'MERCHANT_REQUIRED', merchants: ['a', 'b'] });
    expect(ambiguous.json().message).toContain('AMB-1');
    const a = await get('/api/orders/AMB-1?merchant=a');
    const b = await get('/api/orders/AMB-1?merchant=b');
    expect(a.json()).toMatchObject({ merchant: 'a', amount: '10' });
    expect(b.json()).toMatchObject({ merchant: 'b', amount: '20' });
    expect((await get('/api/orders/AMB-1?merchant=zz')).statusCode).toBe(400);
  });

  it("each merchant's order tells only its own callbacks, on the page and in the API", async () => {
    // A callback of A's for order AMB-1 that the worker recorded (its job gone from the queue): A's story, not B's.
    await env.db.pool.query(
      `insert into callback_arrivals (job_id, merchant_no, kind, order_no, state, merchant_order_no, amount,
                                      received_at, first_seen_at, updated_at, attempts, status)
       values ('payin-PAMB-1-6', 'M-A', 'payin', 'PAMB-1', 6, 'AMB-1', 10, now(), now(), now(), 1, 'waiting')`,
    );
    const a = await get('/api/orders/AMB-1?merchant=a');
    const b = await get('/api/orders/AMB-1?merchant=b');
    expect([a.statusCode, b.statusCode]).toEqual([200, 200]);
    expect(JSON.stringify(a.json().timeline)).toContain('PAMB-1');
    expect(JSON.stringify(b.json().timeline)).not.toContain('PAMB-1');
    const pageB = await get('/orders/AMB-1?merchant=b');
    expect(pageB.statusCode).toBe(200);
    expect(pageB.body).not.toContain('PAMB-1');
    expect((await get('/orders/AMB-1?merchant=a')).body).toContain('PAMB-1');
  });

  it('one merchant holding the number answers it without ?merchant=; the page lists candidates', async () => {
    await post('/api/payins', payin('ONLY-B', { merchant: 'b' }));
    const res = await get('/api/orders/ONLY-B');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ merchant: 'b', merchantOrderNo: 'ONLY-B' });
    expect((await get('/api/orders/ONLY-B?merchant=a')).statusCode).toBe(404);
    const page = await get('/orders/AMB-1');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('/orders/AMB-1?merchant=a');
    expect(page.body).toContain('/orders/AMB-1?merchant=b');
  });
});

describe('the catalog is each merchant’s own', () => {
  it('a payout is validated against the named merchant’s catalog, asked with its number', async () => {
    const forA = await post('/api/payouts', bankPayout('PO-1', 'a'));
    expect(forA.statusCode).toBe(201);
    expect(forA.json()).toMatchObject({ merchant: 'a', apiParams: expect.any(Object) });
    const forB = await post('/api/payouts', bankPayout('PO-1', 'b'));
    expect(forB.statusCode).toBe(422);
    expect(forB.json()).toMatchObject({ code: 'PAYOUT_INVALID' });
    expect(platformB.catalog.requests.every((r) => r.merchantNo === 'M-B')).toBe(true);
    expect(platformA.catalog.requests.every((r) => r.merchantNo === 'M-A')).toBe(true);
    const catalogB = await get('/api/payment-methods?merchant=b');
    expect(catalogB.json().currencies.map((c: { currency: string }) => c.currency)).toEqual(['JPY']);
    const catalogA = await get('/api/payment-methods?merchant=a');
    expect(catalogA.json().currencies.map((c: { currency: string }) => c.currency)).toContain('PHP');
    expect((await get('/api/payment-methods')).statusCode).toBe(400);
    const validate = await post('/api/payouts/validate', bankPayout('X', 'b'));
    expect(validate.statusCode).toBe(422);
  });
});

describe('sweep now is one merchant’s', () => {
  it("B's sweep asks B's platform about B's orders only, and its audit row names B", async () => {
    await post('/api/payins', payin('SWEEP-A', { merchant: 'a' }));
    await post('/api/payins', payin('SWEEP-B', { merchant: 'b' }));
    platformA.hits.clear();
    platformB.hits.clear();
    expect((await post('/api/reconcile', {})).statusCode).toBe(400);
    const res = await post('/api/reconcile', { merchant: 'b' });
    expect(res.statusCode).toBe(200);
    expect(platformA.hits.size).toBe(0);
    expect([...platformB.hits.keys()]).toContain('SWEEP-B');
    expect([...platformB.hits.keys()]).not.toContain('SWEEP-A');
    const [audit] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.action, 'reconcile.run'))
      .orderBy(desc(operatorActions.id))
      .limit(1);
    expect(audit).toMatchObject({ target: 'sweep:b', details: expect.objectContaining({ merchant: 'b' }) });
  });
});
