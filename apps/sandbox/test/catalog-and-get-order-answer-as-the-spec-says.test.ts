import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp, CATALOG, GET_ORDER_PATH, GET_PAYMENT_METHODS_PATH, PLATFORM_CODES } from '../src/app.ts';
import { MERCHANT_NO, testKeys } from './helpers/sandbox.ts';

let app: FastifyInstance;
beforeAll(async () => {
  app = await buildApp({ merchantNo: MERCHANT_NO, merchantPublicKeyPem: testKeys().publicKeyPem });
});
afterAll(async () => {
  await app.close();
});

async function methods(payload: Record<string, string>, form = false) {
  const res = await app.inject({
    method: 'POST',
    url: GET_PAYMENT_METHODS_PATH,
    ...(form
      ? {
          payload: new URLSearchParams(payload).toString(),
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }
      : { payload }),
  });
  expect(res.statusCode).toBe(200);
  return res.json() as { code: number; message: string; data: { currencies: typeof CATALOG } | null };
}

describe('getPaymentMethods', () => {
  it('returns every enabled currency in the spec envelope with only the spec fields', async () => {
    const body = await methods({ merchantNo: MERCHANT_NO });
    expect(body.code).toBe(0);
    expect(body.message).toBe('success');
    const currencies = body.data!.currencies;
    expect(currencies).toEqual(JSON.parse(JSON.stringify(CATALOG)));
    expect(currencies.map((c) => c.currency)).toEqual(['INR', 'BRL', 'VND', 'KWD']);
    expect(new Set(currencies.map((c) => c.decimals))).toEqual(new Set([0, 2, 3]));
    for (const c of currencies) {
      expect(Object.keys(c).sort()).toEqual(['currency', 'decimals', 'methods', 'symbol']);
      for (const m of c.methods) {
        expect(
          Object.keys(m)
            .filter((k) => k !== 'banks')
            .sort(),
        ).toEqual(['fields', 'kind', 'name', 'paymentMethod']);
        expect(['bank', 'wallet', 'qrcode']).toContain(m.kind);
        for (const f of m.fields) {
          expect(Object.keys(f).sort()).toEqual(['apiParam', 'hint', 'key', 'label', 'pattern', 'required']);
          if (f.pattern) expect(() => new RegExp(f.pattern)).not.toThrow();
        }
        for (const b of m.banks ?? []) expect(Object.keys(b).sort()).toEqual(['code', 'name']);
      }
    }
    const all = currencies.flatMap((c) => c.methods);
    expect(new Set(all.map((m) => m.kind))).toEqual(new Set(['bank', 'wallet', 'qrcode']));
    expect(all.some((m) => m.banks && m.banks.length > 0)).toBe(true);
    expect(all.some((m) => m.banks === undefined)).toBe(true);
    const fields = all.flatMap((m) => m.fields);
    expect(fields.some((f) => f.apiParam === '')).toBe(true);
    expect(fields.some((f) => !f.required)).toBe(true);
    expect(fields.some((f) => f.pattern === '')).toBe(true);
    expect(new Set(all.map((m) => m.paymentMethod)).size).toBe(all.length);
  });

  it('narrows to the one currency named by currencyType, also when sent as a form', async () => {
    for (const form of [false, true]) {
      const body = await methods({ merchantNo: MERCHANT_NO, currencyType: 'VND' }, form);
      expect(body.code).toBe(0);
      expect(body.data!.currencies).toHaveLength(1);
      expect(body.data!.currencies[0]).toMatchObject({ currency: 'VND', decimals: 0 });
    }
  });

  it('answers 40017 for a currencyType that is not enabled', async () => {
    const body = await methods({ merchantNo: MERCHANT_NO, currencyType: 'EUR' });
    expect(body).toMatchObject({ code: PLATFORM_CODES.currencyNotEnabled, data: null });
    expect(body.code).toBe(40017);
  });

  it('answers 40010 for a missing or foreign merchantNo', async () => {
    expect((await methods({})).code).toBe(40010);
    expect((await methods({ merchantNo: 'SOMEONE-ELSE' })).code).toBe(40010);
  });
});

describe('Get order', () => {
  async function getOrder(payload: Record<string, string>) {
    const res = await app.inject({ method: 'POST', url: GET_ORDER_PATH, payload });
    expect(res.statusCode).toBe(200);
    return { body: res.json() as { code: number; data: Record<string, unknown> | null }, raw: res.body };
  }

  it('reports the DESIGN.md shape and follows the order through its states', async () => {
    const order = app.sandbox.createPayin({
      merchantOrderNo: 'GO-1',
      currency: 'INR',
      amount: '1000.10',
      callbackUrl: 'http://127.0.0.1:9/x',
    });
    let { body } = await getOrder({ merchantNo: MERCHANT_NO, merchantOrderNo: 'GO-1' });
    expect(body).toEqual({
      code: 0,
      message: 'success',
      data: {
        orderNo: order.orderNo,
        merchantNo: MERCHANT_NO,
        merchantOrderNo: 'GO-1',
        type: 'payin',
        state: 1,
        amount: '1000.10',
        currency: 'INR',
      },
    });
    app.sandbox.finalize('GO-1', 3);
    ({ body } = await getOrder({ merchantNo: MERCHANT_NO, merchantOrderNo: 'GO-1' }));
    expect(body.data?.state).toBe(3);
    // 3 sends no callback (only 6 does), so nothing was scheduled.
    expect(app.sandbox.deliveriesOf(order.orderNo)).toEqual([]);

    app.sandbox.createPayout({ merchantOrderNo: 'GO-2', currency: 'KWD', amount: '12.345', createdVia: 'console' });
    app.sandbox.finalize('GO-2', 5);
    ({ body } = await getOrder({ merchantNo: MERCHANT_NO, merchantOrderNo: 'GO-2' }));
    expect(body.data).toMatchObject({ type: 'payout', state: 5, amount: '12.345', currency: 'KWD' });
  });

  it('can write amount as a JSON number that keeps its exact decimal text', async () => {
    app.sandbox.createPayin({
      merchantOrderNo: 'GO-3',
      currency: 'BRL',
      amount: '250.50',
      callbackUrl: 'http://127.0.0.1:9/x',
    });
    app.sandbox.setFaults({ amountAsNumber: true });
    try {
      const { raw } = await getOrder({ merchantNo: MERCHANT_NO, merchantOrderNo: 'GO-3' });
      expect(raw).toContain('"amount":250.50,');
      expect(JSON.parse(raw).data.amount).toBe(250.5);
    } finally {
      app.sandbox.setFaults({ amountAsNumber: false });
    }
  });

  it('answers 40404 for an unknown order, also when given the platform number, and 40010 for another merchant', async () => {
    const order = app.sandbox.createPayin({
      merchantOrderNo: 'GO-4',
      currency: 'INR',
      amount: '1',
      callbackUrl: 'http://127.0.0.1:9/x',
    });
    expect((await getOrder({ merchantNo: MERCHANT_NO, merchantOrderNo: 'NOPE' })).body.code).toBe(40404);
    expect((await getOrder({ merchantNo: MERCHANT_NO, merchantOrderNo: order.orderNo })).body.code).toBe(40404);
    expect((await getOrder({ merchantNo: MERCHANT_NO })).body.code).toBe(40404);
    expect((await getOrder({ merchantNo: 'OTHER', merchantOrderNo: 'GO-4' })).body.code).toBe(40010);
  });
});
