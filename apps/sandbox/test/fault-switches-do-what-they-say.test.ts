import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@mcb/testkit';
import type { FastifyInstance } from 'fastify';
import { GET_ORDER_PATH, GET_PAYMENT_METHODS_PATH } from '../src/app.ts';
import { MERCHANT_NO, postJson, startReceiver, startSandbox, type Receiver } from './helpers/sandbox.ts';

let app: FastifyInstance;
let base: string;
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
  ({ app, url: base } = await startSandbox({ payinCallbackUrl: receiver.url, payoutCallbackUrl: receiver.url }));
});
afterEach(() => {
  app.sandbox.reset();
  receiver.received.length = 0;
});
afterAll(async () => {
  await app.close();
  await receiver.close();
});

async function getOrder(merchantOrderNo: string) {
  return (await postJson(base, GET_ORDER_PATH, { merchantNo: MERCHANT_NO, merchantOrderNo })).json as {
    code: number;
    data: { state: number; amount: string } | null;
  };
}

describe('duplicate', () => {
  it('sends every attempt N times at once, recorded as copies of one attempt', async () => {
    const sim = app.sandbox;
    sim.setFaults({ duplicate: 3 });
    sim.createPayin({ merchantOrderNo: 'DU-1', currency: 'INR', amount: '7' });
    const d = await sim.settled(sim.finalize('DU-1', 6).deliveries[0]!);
    expect(receiver.received).toHaveLength(3);
    expect(new Set(receiver.received.map((r) => r.record)).size).toBe(1);
    expect(d.attempts.map((a) => [a.number, a.copy])).toEqual([
      [1, 1],
      [1, 2],
      [1, 3],
    ]);
  });

  it('can be set on one order only', async () => {
    const sim = app.sandbox;
    sim.createPayout({ merchantOrderNo: 'DU-2', currency: 'INR', amount: '7', faults: { duplicate: 2 } });
    sim.createPayout({ merchantOrderNo: 'DU-3', currency: 'INR', amount: '7' });
    await sim.settled(sim.finalize('DU-2', 4).deliveries[0]!);
    await sim.settled(sim.finalize('DU-3', 4).deliveries[0]!);
    const counts = receiver.received.map((r) => r.parsed.MerchantOrderNo);
    expect(counts.filter((n) => n === 'DU-2')).toHaveLength(2);
    expect(counts.filter((n) => n === 'DU-3')).toHaveLength(1);
  });
});

describe('outOfOrder', () => {
  it('holds callbacks while on and sends them newest first when switched off', async () => {
    const sim = app.sandbox;
    sim.setFaults({ outOfOrder: true });
    for (const n of ['OO-1', 'OO-2', 'OO-3']) {
      sim.createPayin({ merchantOrderNo: n, currency: 'INR', amount: '1' });
      expect(sim.finalize(n, 6).deliveries[0]!.status).toBe('held');
    }
    // Held means held: nothing arrives while the switch is on (the first attempt delay is 0 here).
    await new Promise((r) => setTimeout(r, 100));
    expect(receiver.received).toHaveLength(0);
    sim.setFaults({ outOfOrder: false });
    await waitFor(() => receiver.received.length === 3);
    expect(receiver.received.map((r) => r.parsed.MerchantOrderNo)).toEqual(['OO-3', 'OO-2', 'OO-1']);
  });

  it('for a payout with the stale switch, sends an earlier event with the other final state after the real one', async () => {
    const sim = app.sandbox;
    sim.createPayout({ merchantOrderNo: 'ST-1', currency: 'BRL', amount: '3.00', faults: { stale: true } });
    const [genuine, stale] = sim.finalize('ST-1', 4).deliveries;
    await sim.settled(genuine!);
    await sim.settled(stale!);
    expect(receiver.received.map((r) => r.parsed.state)).toEqual([4, 5]);
    expect(stale!.event).toBe('stale');
    // The stale record claims an earlier time, and Get order still says 4.
    expect(String(receiver.received[1]!.parsed.PayTime) < String(receiver.received[0]!.parsed.PayTime)).toBe(true);
    expect((await getOrder('ST-1')).data?.state).toBe(4);
  });
});

describe('forge', () => {
  it('sends a pay-in record with another amount, which Get order contradicts', async () => {
    const sim = app.sandbox;
    sim.createPayin({ merchantOrderNo: 'FG-1', currency: 'INR', amount: '100.50' });
    sim.finalize('FG-1', 6);
    const forged = sim.forge({ what: 'amount', ref: 'FG-1' });
    await sim.settled(forged);
    const record = receiver.received.find((r) => r.parsed.FiatCurrency === 1005)!;
    expect(record.parsed.MerchantOrderNo).toBe('FG-1');
    expect((await getOrder('FG-1')).data?.amount).toBe('100.50');
    expect(forged.event).toBe('forged');
  });

  it('sends a state the order never reached', async () => {
    const sim = app.sandbox;
    sim.createPayin({ merchantOrderNo: 'FG-2', currency: 'INR', amount: '1' });
    sim.createPayout({ merchantOrderNo: 'FG-3', currency: 'INR', amount: '1' });
    await sim.settled(sim.forge({ what: 'state', ref: 'FG-2' }));
    await sim.settled(sim.forge({ what: 'state', ref: 'FG-3' }));
    expect(receiver.received.map((r) => [r.parsed.MerchantOrderNo, r.parsed.OrderState ?? r.parsed.state])).toEqual([
      ['FG-2', 6],
      ['FG-3', 4],
    ]);
    expect((await getOrder('FG-2')).data?.state).toBe(1);
    expect((await getOrder('FG-3')).data?.state).toBe(1);
  });

  it('sends a record for an order Get order has never heard of, through the control API', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/control/forge',
      payload: { what: 'unknown-order', type: 'payout' },
    });
    expect(res.statusCode).toBe(201);
    await waitFor(() => receiver.received.length === 1);
    const ghost = String(receiver.received[0]!.parsed.MerchantOrderNo);
    expect(receiver.received[0]!.parsed.state).toBe(4);
    expect((await getOrder(ghost)).code).toBe(40404);
  });

  it('refuses forgeries that would not contradict anything', async () => {
    const sim = app.sandbox;
    sim.createPayout({ merchantOrderNo: 'FG-4', currency: 'INR', amount: '1' });
    expect(() => sim.forge({ what: 'amount', ref: 'FG-4' })).toThrow(/no amount/);
    sim.createPayin({ merchantOrderNo: 'FG-5', currency: 'INR', amount: '1' });
    sim.finalize('FG-5', 6);
    expect(() => sim.forge({ what: 'state', ref: 'FG-5' })).toThrow(/did reach 6/);
  });
});

describe('platform API faults', () => {
  it('apiDown=error makes getOrder and getPaymentMethods answer HTTP 500', async () => {
    app.sandbox.setFaults({ apiDown: 'error' });
    expect((await postJson(base, GET_ORDER_PATH, { merchantNo: MERCHANT_NO, merchantOrderNo: 'x' })).status).toBe(500);
    expect((await postJson(base, GET_PAYMENT_METHODS_PATH, { merchantNo: MERCHANT_NO })).status).toBe(500);
    app.sandbox.setFaults({ apiDown: 'off' });
    expect((await postJson(base, GET_PAYMENT_METHODS_PATH, { merchantNo: MERCHANT_NO })).status).toBe(200);
  });

  it('apiDown=hang leaves the caller without an answer until it gives up', async () => {
    app.sandbox.setFaults({ apiDown: 'hang' });
    const started = Date.now();
    const attempt = fetch(`${base}${GET_ORDER_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ merchantNo: MERCHANT_NO, merchantOrderNo: 'x' }),
      signal: AbortSignal.timeout(300),
    });
    await expect(attempt).rejects.toThrow(/abort|timeout/i);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('apiDelayMs slows every platform answer by that much', async () => {
    app.sandbox.setFaults({ apiDelayMs: 250 });
    const started = Date.now();
    const res = await postJson(base, GET_PAYMENT_METHODS_PATH, { merchantNo: MERCHANT_NO, currencyType: 'INR' });
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(245);
  });

  it('refuses unknown or out-of-range fault values', async () => {
    for (const payload of [{ apiDown: 'sometimes' }, { duplicate: 0 }, { apiDelayMs: -1 }, { nope: true }]) {
      expect((await app.inject({ method: 'PUT', url: '/control/faults', payload })).statusCode).toBe(400);
    }
  });
});
