import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackReceipts, ledgerEntries, orders, reviews } from '@mcb/core/db';
import { MERCHANT_NO, useTestEnv } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { AUTH, startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;

beforeAll(async () => {
  platform = await startFakePlatform();
  c = await startConsole({ db: env.db, databaseUrl: env.databaseUrl, baseUrl: platform.baseUrl });
});

afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

// Registrations are operator actions: each carries a reason (not part of what makes two registrations the same).
const post = (url: string, payload: unknown) =>
  c.app.inject({
    method: 'POST',
    url,
    payload: { reason: `test ${Math.random()}`, ...(payload as object) },
    headers: AUTH,
  });
const get = (url: string) => c.app.inject({ method: 'GET', url, headers: AUTH });

describe('POST /api/payins', () => {
  it('registers a pay-in (201), answers 200 to the same body, 409 to a different one', async () => {
    const body = { merchantOrderNo: 'PI-1', currency: 'PHP', amount: '100.50', customerId: 'cust-9' };
    const first = await post('/api/payins', body);
    expect(first.statusCode).toBe(201);
    expect(first.json()).toEqual({
      merchantOrderNo: 'PI-1',
      kind: 'payin',
      status: 'pending',
      currency: 'PHP',
      amount: '100.5',
      platformOrderNo: null,
      customerId: 'cust-9',
      ledger: [],
      review: null,
    });
    // The same body, with the amount written differently and the keys in another order, is the same request.
    const again = await post('/api/payins', {
      customerId: 'cust-9',
      amount: '100.500',
      currency: 'PHP',
      merchantOrderNo: 'PI-1',
    });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first.json());

    for (const different of [
      { ...body, amount: '100.51' },
      { ...body, currency: 'JPY' },
      { ...body, customerId: 'cust-8' },
      { merchantOrderNo: 'PI-1', currency: 'PHP', amount: '100.50' },
    ]) {
      const res = await post('/api/payins', different);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ code: 'ORDER_CONFLICT', message: expect.stringContaining('PI-1') });
    }
    const rows = await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'PI-1'));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ amount: '100.5', customerId: 'cust-9', kind: 'payin' });
    expect(rows[0]!.requestHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses a payout body under a pay-in number (409), since the kind is part of the body', async () => {
    await post('/api/payins', { merchantOrderNo: 'PI-2', currency: 'PHP', amount: '5' });
    const res = await post('/api/payouts', {
      merchantOrderNo: 'PI-2',
      currency: 'PHP',
      amount: '5',
      paymentMethod: 1,
      params: { accountName: 'A', accountNo: '1234567890', bank: 'BDO Unibank' },
    });
    expect(res.statusCode).toBe(409);
  });

  it('creates exactly one order when the same registration races with itself', async () => {
    const body = { merchantOrderNo: 'PI-RACE', currency: 'PHP', amount: '7.25' };
    const results = await Promise.all(Array.from({ length: 8 }, () => post('/api/payins', body)));
    const codes = results.map((r) => r.statusCode).sort();
    expect(codes).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'PI-RACE'))).toHaveLength(1);
  });

  it.each([
    ['an amount as a JSON number', { amount: 100.5 }, 'amount'],
    ['a zero amount', { amount: '0' }, 'amount'],
    ['a negative amount', { amount: '-1' }, 'amount'],
    ['an exponent', { amount: '1e3' }, 'amount'],
    ['leading zeros', { amount: '007' }, 'amount'],
    ['a lower-case currency', { currency: 'php' }, 'currency'],
    ['a missing order number', { merchantOrderNo: undefined }, 'merchantOrderNo'],
    ['a space in the order number', { merchantOrderNo: 'A B' }, 'merchantOrderNo'],
    ['an unknown field', { customerID: 'x' }, ''],
  ])('answers 400 REQUEST_INVALID naming the field for %s, and stores nothing', async (_what, change, field) => {
    const body = { merchantOrderNo: 'PI-BAD', currency: 'PHP', amount: '10', ...change };
    const res = await post('/api/payins', body);
    expect(res.statusCode).toBe(400);
    const json = res.json() as { code: string; errors: { field: string }[] };
    expect(json.code).toBe('REQUEST_INVALID');
    expect(json.errors.map((e) => e.field)).toContain(field || 'body');
    expect(await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'PI-BAD'))).toEqual([]);
  });

  it('answers 400 to a body that is not JSON, without echoing it', async () => {
    const res = await c.app.inject({
      method: 'POST',
      url: '/api/payins',
      payload: '{"merchantOrderNo": secret',
      headers: { ...AUTH, 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'REQUEST_INVALID' });
    expect(res.body).not.toContain('secret');
  });
});

describe('GET /api/orders/{merchantOrderNo}', () => {
  it('answers 404 NOT_FOUND for an unknown number', async () => {
    const res = await get('/api/orders/NOPE-1');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'NOT_FOUND', message: 'no order NOPE-1' });
  });

  it('shows the order with the ledger and the open review the worker wrote', async () => {
    await post('/api/payins', { merchantOrderNo: 'PI-VIEW', currency: 'PHP', amount: '250.00' });
    const [order] = await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'PI-VIEW'));
    // What the worker would write once the platform confirms the pay-in.
    await env.db.db
      .update(orders)
      .set({ status: 'credited', platformOrderNo: 'P-777', finalizedAt: new Date() })
      .where(eq(orders.id, order!.id));
    const [receipt] = await env.db.db
      .insert(callbackReceipts)
      .values({
        orderNo: 'P-777',
        state: 6,
        kind: 'payin',
        merchantNo: MERCHANT_NO,
        merchantOrderNo: 'PI-VIEW',
        orderId: order!.id,
        confirmedAmount: '250',
        source: 'callback',
        outcome: 'credited',
      })
      .returning();
    const creditedAt = new Date('2026-01-02T03:04:05.000Z');
    await env.db.db.insert(ledgerEntries).values({
      orderId: order!.id,
      entryType: 'payin_credit',
      amount: '250.00',
      currency: 'PHP',
      receiptId: receipt!.id,
      createdAt: creditedAt,
    });
    const reviewedAt = new Date('2026-01-02T04:00:00.000Z');
    const event = { orderNo: 'P-777', state: 6 };
    await env.db.db.insert(reviews).values([
      {
        kind: 'payin',
        orderNo: 'P-777',
        state: 3,
        merchantOrderNo: 'PI-VIEW',
        reasonCode: 'VERIFY_NOT_FINAL',
        reason: 'old',
        event,
        status: 'resolved',
      },
      {
        kind: 'payin',
        orderNo: 'P-777',
        state: 6,
        merchantOrderNo: 'PI-VIEW',
        reasonCode: 'VERIFY_AMOUNT_MISMATCH',
        reason: 'amount 250 ≠ 251',
        event,
        createdAt: reviewedAt,
      },
    ]);

    const res = await get('/api/orders/PI-VIEW');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      merchantOrderNo: 'PI-VIEW',
      kind: 'payin',
      status: 'credited',
      currency: 'PHP',
      amount: '250',
      platformOrderNo: 'P-777',
      customerId: null,
      ledger: [{ entryType: 'payin_credit', amount: '250', currency: 'PHP', createdAt: creditedAt.toISOString() }],
      review: { reason: 'amount 250 ≠ 251', at: reviewedAt.toISOString() },
      timeline: expect.any(Array),
      jobs: [],
      callbacksKnown: 'all',
    });
    // The timeline has the database's part of the story (this console has no queue): receipt, ledger, review, by time.
    const timeline = (res.json() as { timeline: { at: string; event: string }[] }).timeline;
    expect([...new Set(timeline.map((e) => e.event))].sort()).toEqual(['applied', 'ledger-entry', 'review-opened']);
    expect(timeline.map((e) => e.at)).toEqual(timeline.map((e) => e.at).sort());
  });
});
