import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { catalogSnapshots, orders } from '@mcb/core/db';
import { MERCHANT_NO, useTestEnv } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { AUTH, startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;

beforeAll(async () => {
  platform = await startFakePlatform();
  // freshForMs 0: every read asks the platform, so each test controls what the platform says.
  c = await startConsole({ db: env.db, databaseUrl: env.databaseUrl, baseUrl: platform.baseUrl, freshForMs: 0 });
});

afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

beforeEach(async () => {
  platform.state.mode = { kind: 'ok' };
  platform.state.requests = [];
  await env.db.db.delete(catalogSnapshots);
});

const post = (url: string, payload: unknown) =>
  c.app.inject({ method: 'POST', url, payload: { reason: 'test', ...(payload as object) }, headers: AUTH });
const bankParams = { accountName: 'Juan Cruz', accountNo: '1234567890', bank: 'BDO Unibank' };
const payout = (no: string, extra: object = {}) => ({
  merchantOrderNo: no,
  currency: 'PHP',
  amount: '1500.50',
  paymentMethod: 1,
  params: bankParams,
  ...extra,
});

describe('POST /api/payouts', () => {
  it('registers a valid payout (201) with the create-payout parameters keyed by apiParam', async () => {
    const res = await post('/api/payouts', payout('PO-1'));
    expect(res.statusCode).toBe(201);
    expect(res.json()).toEqual({
      merchantOrderNo: 'PO-1',
      kind: 'payout',
      status: 'pending',
      currency: 'PHP',
      amount: '1500.5',
      platformOrderNo: null,
      customerId: null,
      ledger: [],
      review: null,
      paymentMethod: 1,
      apiParams: { accountName: 'Juan Cruz', bankAccount: '1234567890', bankName: 'BDO Unibank' },
    });
    expect(platform.state.requests).toEqual([{ merchantNo: MERCHANT_NO, currencyType: 'PHP' }]);
    const [row] = await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'PO-1'));
    expect(row).toMatchObject({ kind: 'payout', paymentMethod: 1, payoutParams: res.json().apiParams });
  });

  it('answers 422 with every problem, each naming its field, and stores nothing', async () => {
    const res = await post(
      '/api/payouts',
      payout('PO-BAD', { amount: '10.005', params: { accountNo: '12', bank: 'Chase', extra: 'x' } }),
    );
    expect(res.statusCode).toBe(422);
    const json = res.json() as { code: string; errors: { field: string; message: string }[] };
    expect(json.code).toBe('PAYOUT_INVALID');
    expect(json.errors.map((e) => e.field)).toEqual([
      'amount',
      'params.accountName',
      'params.accountNo',
      'params.bank',
      'params.extra',
    ]);
    expect(json.errors[0]!.message).toBe('PHP allows at most 2 decimal places; got 3');
    expect(await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'PO-BAD'))).toEqual([]);
  });

  it('answers 422 for a currency that is not enabled, a method not offered, and a field the API cannot carry', async () => {
    const usd = await post('/api/payouts', payout('PO-USD', { currency: 'USD' }));
    expect(usd.statusCode).toBe(422);
    expect(usd.json().errors).toEqual([{ field: 'currency', message: expect.stringContaining('USD is not enabled') }]);
    const m9 = await post('/api/payouts', payout('PO-M9', { paymentMethod: 9 }));
    expect(m9.json().errors).toEqual([
      { field: 'paymentMethod', message: expect.stringContaining('method 9 is not offered for PHP') },
    ]);
    const qr = await post('/api/payouts', payout('PO-QR', { paymentMethod: 3, params: {} }));
    expect(qr.json().errors).toEqual([
      { field: 'params.idPhoto', message: expect.stringContaining('cannot be sent through the API') },
    ]);
  });

  it('answers 200 to a repeat without asking the catalog, even with the platform failing, and 409 to a different body', async () => {
    expect((await post('/api/payouts', payout('PO-2'))).statusCode).toBe(201);
    platform.state.mode = { kind: 'code', code: 40010, message: 'merchant disabled' };
    platform.state.requests = [];
    const again = await post(
      '/api/payouts',
      payout('PO-2', { params: { bank: 'BDO Unibank', accountNo: '1234567890', accountName: 'Juan Cruz' } }),
    );
    expect(again.statusCode).toBe(200);
    expect(again.json().apiParams).toEqual({
      accountName: 'Juan Cruz',
      bankAccount: '1234567890',
      bankName: 'BDO Unibank',
    });
    expect(platform.state.requests).toEqual([]);
    const other = await post('/api/payouts', payout('PO-2', { params: { ...bankParams, bank: 'Metrobank' } }));
    expect(other.statusCode).toBe(409);
    expect(other.json()).toMatchObject({ code: 'ORDER_CONFLICT' });
  });

  it('passes the platform not knowing our merchant number (40010) to the caller as 502 MERCHANT_UNKNOWN with the code', async () => {
    platform.state.mode = { kind: 'code', code: 40010, message: 'merchant does not exist' };
    const res = await post('/api/payouts', payout('PO-E40010'));
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({
      code: 'MERCHANT_UNKNOWN',
      platformCode: 40010,
      platformMessage: 'merchant does not exist',
    });
  });

  it('refuses a payout in a currency the platform does not enable (40017) as 422 PAYOUT_INVALID on the currency field', async () => {
    platform.state.mode = { kind: 'code', code: 40017, message: 'currency type not supported' };
    const res = await post('/api/payouts', payout('PO-E40017'));
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({
      code: 'PAYOUT_INVALID',
      platformCode: 40017,
      errors: [{ field: 'currency', message: expect.stringContaining('is not enabled for this merchant') }],
    });
  });

  it('answers 503 CATALOG_UNAVAILABLE with Retry-After when the platform is down and nothing is cached', async () => {
    platform.state.mode = { kind: 'http', status: 503 };
    const res = await post('/api/payouts', payout('PO-DOWN'));
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 'CATALOG_UNAVAILABLE' });
    expect(res.headers['retry-after']).toBe('30');
  });

  it('validates against the stored catalog when the platform is down, and says so in headers', async () => {
    await post('/api/payouts/validate', payout('x'));
    platform.state.mode = { kind: 'http', status: 502 };
    const res = await post('/api/payouts', payout('PO-STALE'));
    expect(res.statusCode).toBe(201);
    expect(res.headers['x-catalog-stale']).toBe('true');
    expect(Number(res.headers['x-catalog-age-seconds'])).toBeGreaterThanOrEqual(0);
  });
});

describe('POST /api/payouts/validate', () => {
  it('returns the apiParams of a valid payout without registering it', async () => {
    const res = await post('/api/payouts/validate', {
      currency: 'PHP',
      amount: '1',
      paymentMethod: 1,
      params: bankParams,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      ok: true,
      apiParams: { accountName: 'Juan Cruz', bankAccount: '1234567890', bankName: 'BDO Unibank' },
      catalog: { fetchedAt: expect.any(String), ageSeconds: 0, stale: false },
    });
    expect(await env.db.db.select().from(orders).where(eq(orders.kind, 'payout'))).not.toContainEqual(
      expect.objectContaining({ amount: '1' }),
    );
  });

  it('decides a catastrophic-backtracking pattern quickly and reports the mismatch', async () => {
    const res = await post('/api/payouts/validate', {
      currency: 'PHP',
      amount: '1',
      paymentMethod: 2,
      params: { mobile: `${'a'.repeat(30)}!` },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toEqual([
      { field: 'params.mobile', message: expect.stringContaining('does not match the required pattern (a+)+$') },
    ]);
  });

  it('answers 400 with the field for a body of the wrong shape', async () => {
    const res = await post('/api/payouts/validate', {
      currency: 'PHP',
      amount: '1',
      paymentMethod: '1',
      params: { a: 5 },
    });
    expect(res.statusCode).toBe(400);
    expect(
      res
        .json()
        .errors.map((e: { field: string }) => e.field)
        .sort(),
    ).toEqual(['params.a', 'paymentMethod']);
  });
});
