import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '@mcb/testkit';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.ts';
import { MERCHANT_NO, startReceiver, startSandbox, testKeys, type Receiver } from './helpers/sandbox.ts';

let app: FastifyInstance;
let payins: Receiver;
let payouts: Receiver;
beforeAll(async () => {
  payins = await startReceiver();
  payouts = await startReceiver();
  ({ app } = await startSandbox({ payinCallbackUrl: payins.url, payoutCallbackUrl: payouts.url }));
});
afterEach(() => {
  app.sandbox.reset();
  payins.received.length = 0;
  payouts.received.length = 0;
});
afterAll(async () => {
  await app.close();
  await payins.close();
  await payouts.close();
});

describe('callback URL selection', () => {
  it('uses the console default of each kind when the order has no callbackUrl', async () => {
    const sim = app.sandbox;
    sim.createPayin({ merchantOrderNo: 'U-1', currency: 'INR', amount: '1' });
    sim.createPayout({ merchantOrderNo: 'U-2', currency: 'INR', amount: '1' });
    await sim.settled(sim.finalize('U-1', 6).deliveries[0]!);
    await sim.settled(sim.finalize('U-2', 5).deliveries[0]!);
    expect(payins.received.map((r) => r.parsed.MerchantOrderNo)).toEqual(['U-1']);
    expect(payouts.received.map((r) => r.parsed.MerchantOrderNo)).toEqual(['U-2']);
  });

  it("prefers the order's own callbackUrl", async () => {
    const own = await startReceiver();
    try {
      app.sandbox.createPayin({ merchantOrderNo: 'U-3', currency: 'INR', amount: '1', callbackUrl: own.url });
      await app.sandbox.settled(app.sandbox.finalize('U-3', 6).deliveries[0]!);
      expect(own.received).toHaveLength(1);
      expect(payins.received).toHaveLength(0);
    } finally {
      await own.close();
    }
  });

  it('refuses at creation a plain-http public URL and other non-https schemes, naming the rule', async () => {
    const cases = ['http://merchant.example.com/cb', 'ftp://merchant.example.com/cb', 'not a url'];
    for (const callbackUrl of cases) {
      const res = await app.inject({
        method: 'POST',
        url: '/control/payins',
        payload: { currency: 'INR', amount: '1', callbackUrl },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: 'REQUEST_INVALID', details: { field: 'callbackUrl' } });
      expect(res.json().message).toMatch(/https|not a URL/);
    }
    const ok = await app.inject({
      method: 'POST',
      url: '/control/payins',
      payload: { currency: 'INR', amount: '1', callbackUrl: 'https://merchant.example.com/cb' },
    });
    expect(ok.statusCode).toBe(201);
    expect(app.sandbox.list()).toHaveLength(1);
  });

  it('refuses local URLs when local callbacks are not allowed, and accepts them otherwise', async () => {
    const strict = await buildApp({
      merchantNo: MERCHANT_NO,
      merchantPublicKeyPem: testKeys().publicKeyPem,
      allowLocalCallbacks: false,
    });
    try {
      for (const callbackUrl of [
        'http://127.0.0.1:8080/cb',
        'https://localhost/cb',
        'http://[::1]:80/cb',
        'http://127.9.9.9/cb',
      ]) {
        const res = await strict.inject({
          method: 'POST',
          url: '/control/payouts',
          payload: { currency: 'INR', amount: '1', callbackUrl },
        });
        expect(res.statusCode).toBe(400);
        expect(res.json().message).toMatch(/SANDBOX_ALLOW_LOCAL_CALLBACKS/);
      }
    } finally {
      await strict.close();
    }
    const res = await app.inject({
      method: 'POST',
      url: '/control/payouts',
      payload: { currency: 'INR', amount: '1', callbackUrl: 'http://[::1]:80/cb' },
    });
    expect(res.statusCode).toBe(201);
    await expect(
      buildApp({
        merchantNo: MERCHANT_NO,
        merchantPublicKeyPem: testKeys().publicKeyPem,
        payinCallbackUrl: 'http://example.com/',
      }),
    ).rejects.toThrow(/payinCallbackUrl/);
  });

  it('refuses to finalise an order that would need a callback but has no URL at all, leaving it unchanged', async () => {
    const sim = app.sandbox;
    sim.setCallbackUrls({ payinCallbackUrl: null });
    sim.createPayin({ merchantOrderNo: 'U-4', currency: 'INR', amount: '1' });
    const res = await app.inject({ method: 'POST', url: '/control/orders/U-4/finalize', payload: { state: 6 } });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/no callback URL/);
    expect(sim.get('U-4').state).toBe(1);
  });
});

describe('console payouts', () => {
  it('produce no callback on either final state, while API payouts do', async () => {
    const sim = app.sandbox;
    sim.createPayout({ merchantOrderNo: 'C-1', currency: 'BRL', amount: '10.00', createdVia: 'console' });
    sim.createPayout({ merchantOrderNo: 'C-2', currency: 'BRL', amount: '10.00', createdVia: 'console' });
    sim.createPayout({ merchantOrderNo: 'C-3', currency: 'BRL', amount: '10.00' });
    expect(sim.finalize('C-1', 4).deliveries).toEqual([]);
    expect(sim.finalize('C-2', 5).deliveries).toEqual([]);
    await sim.settled(sim.finalize('C-3', 4).deliveries[0]!);
    // The API payout's callback has arrived; the console ones, finalised earlier, never will.
    await waitFor(() => payouts.received.length === 1);
    expect(payouts.received.map((r) => r.parsed.MerchantOrderNo)).toEqual(['C-3']);
    expect(sim.deliveriesOf(sim.get('C-1').orderNo)).toEqual([]);
    expect(sim.get('C-2').state).toBe(5);
  });
});
