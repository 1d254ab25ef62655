import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { startReceiver, startSandbox, type Receiver } from './helpers/sandbox.ts';

let app: FastifyInstance;
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
  ({ app } = await startSandbox({ payinCallbackUrl: receiver.url, payoutCallbackUrl: receiver.url }));
});
afterAll(async () => {
  await app.close();
  await receiver.close();
});

const call = (method: 'GET' | 'POST' | 'PUT', url: string, payload?: object) =>
  app.inject({ method, url, ...(payload ? { payload } : {}) });

describe('control API', () => {
  it('creates a pay-in with a generated merchant order number and a computed USDT quantity', async () => {
    const res = await call('POST', '/control/payins', { currency: 'BRL', amount: '100.00' });
    expect(res.statusCode).toBe(201);
    const { order } = res.json();
    expect(order).toMatchObject({
      type: 'payin',
      state: 1,
      amount: '100.00',
      currency: 'BRL',
      quantity: '17.85',
      createdVia: 'api',
    });
    expect(order.merchantOrderNo).toMatch(/^M\d+/);
    expect(order.orderNo).toMatch(/^PI/);
  });

  it('refuses amounts finer than the currency allows, unknown currencies and malformed bodies', async () => {
    for (const payload of [
      { currency: 'VND', amount: '100.5' },
      { currency: 'INR', amount: '1.001' },
      { currency: 'INR', amount: '0' },
      { currency: 'EUR', amount: '1' },
      { currency: 'INR', amount: 1 },
      { currency: 'INR', amount: '1', extra: true },
    ]) {
      const res = await call('POST', '/control/payins', payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error).toBe('REQUEST_INVALID');
    }
    const notJson = await app.inject({
      method: 'POST',
      url: '/control/payins',
      headers: { 'content-type': 'application/json' },
      payload: '{',
    });
    expect(notJson.statusCode).toBe(400);
  });

  it('refuses a second order with the same merchant order number (409)', async () => {
    expect(
      (await call('POST', '/control/payouts', { merchantOrderNo: 'DUP', currency: 'INR', amount: '1' })).statusCode,
    ).toBe(201);
    const again = await call('POST', '/control/payouts', { merchantOrderNo: 'DUP', currency: 'INR', amount: '1' });
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toBe('ORDER_CONFLICT');
  });

  it('moves a pay-in 1 → 3 → 6 with one callback at 6, and refuses other moves', async () => {
    await call('POST', '/control/payins', { merchantOrderNo: 'F-1', currency: 'INR', amount: '10' });
    expect((await call('POST', '/control/orders/F-1/finalize', { state: 4 })).statusCode).toBe(400);
    const three = await call('POST', '/control/orders/F-1/finalize', { state: 3 });
    expect(three.json().deliveries).toEqual([]);
    const six = await call('POST', '/control/orders/F-1/finalize', { state: 6 });
    expect(six.statusCode).toBe(200);
    expect(six.json().deliveries).toHaveLength(1);
    expect((await call('POST', '/control/orders/F-1/finalize', { state: 3 })).statusCode).toBe(409);
    await app.sandbox.settled(app.sandbox.deliveriesOf(six.json().order.orderNo)[0]!);

    const view = await call('GET', '/control/orders/F-1');
    const { order, deliveries } = view.json();
    expect(order.history.map((h: { state: number }) => h.state)).toEqual([1, 3, 6]);
    expect(deliveries[0]).toMatchObject({ status: 'delivered', event: 'genuine', state: 6 });
    expect(deliveries[0].attempts[0]).toMatchObject({
      number: 1,
      copy: 1,
      status: 200,
      bodySnippet: 'success',
      outcome: 'success',
    });
  });

  it('moves a payout to 4 or 5 only once', async () => {
    await call('POST', '/control/payouts', { merchantOrderNo: 'F-2', currency: 'INR', amount: '10' });
    expect((await call('POST', '/control/orders/F-2/finalize', { state: 6 })).statusCode).toBe(400);
    expect((await call('POST', '/control/orders/F-2/finalize', { state: 5 })).statusCode).toBe(200);
    expect((await call('POST', '/control/orders/F-2/finalize', { state: 4 })).statusCode).toBe(409);
    expect((await call('POST', '/control/orders/NOPE/finalize', { state: 4 })).statusCode).toBe(404);
  });

  it('lists orders by kind and forgets everything on reset', async () => {
    const payinsOnly = (await call('GET', '/control/orders?type=payin')).json().orders;
    expect(payinsOnly.length).toBeGreaterThan(0);
    expect(payinsOnly.every((o: { type: string }) => o.type === 'payin')).toBe(true);
    expect((await call('PUT', '/control/faults', { duplicate: 2 })).json().duplicate).toBe(2);
    expect((await call('POST', '/control/reset')).statusCode).toBe(200);
    expect((await call('GET', '/control/orders')).json().orders).toEqual([]);
    expect((await call('GET', '/control/faults')).json().duplicate).toBe(1);
    expect((await call('GET', '/control/settings')).json()).toMatchObject({
      payinCallbackUrl: receiver.url,
      allowLocalCallbacks: true,
    });
  });
});
