import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeCallback, loadKeyRing } from '@mcb/core/callback';
import type { FastifyInstance } from 'fastify';
import { MERCHANT_NO, startReceiver, startSandbox, testKeys, type Receiver } from './helpers/sandbox.ts';

let app: FastifyInstance;
let receiver: Receiver;
beforeAll(async () => {
  ({ app } = await startSandbox());
  receiver = await startReceiver();
});
afterEach(() => {
  app.sandbox.reset();
  receiver.received.length = 0;
});
afterAll(async () => {
  await app.close();
  await receiver.close();
});

const PAY_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/;

describe('callback records', () => {
  it('sends a pay-in record with the spec field names, exact decimals and a UTC+8 PayTime', async () => {
    const sim = app.sandbox;
    const order = sim.createPayin({
      merchantOrderNo: 'R-1',
      currency: 'INR',
      amount: '1000.10',
      callbackUrl: receiver.url,
    });
    const { deliveries } = sim.finalize('R-1', 6);
    await sim.settled(deliveries[0]!);

    const got = receiver.received[0]!;
    expect(Object.keys(JSON.parse(got.body))).toEqual(['encryptedData']);
    expect(got.blocks).toBe(1);
    // Quantity = 1000.10 × 0.011976, exact: numbers are not rounded.
    expect(got.record).toBe(
      `{"OrderNo":"${order.orderNo}","MerchantNo":"${MERCHANT_NO}","MerchantOrderNo":"R-1","PayTime":"${got.parsed.PayTime}",` +
        `"OrderState":6,"Quantity":11.9771976,"FiatCurrency":1000.10}`,
    );
    expect(got.parsed.PayTime).toMatch(PAY_TIME);
    const utc8 = new Date(Date.parse(order.finishedAt!) + 8 * 3600_000).toISOString().slice(0, 19);
    expect(got.parsed.PayTime).toBe(utc8);
  });

  it('sends payout records with a lowercase state, and a null PayTime for a refusal', async () => {
    const sim = app.sandbox;
    sim.createPayout({ merchantOrderNo: 'R-2', currency: 'VND', amount: '150000', callbackUrl: receiver.url });
    sim.createPayout({ merchantOrderNo: 'R-3', currency: 'VND', amount: '150000', callbackUrl: receiver.url });
    await sim.settled(sim.finalize('R-2', 4).deliveries[0]!);
    await sim.settled(sim.finalize('R-3', 5).deliveries[0]!);
    const [ok, refused] = receiver.received.map((r) => r.parsed);
    expect(Object.keys(ok!)).toEqual(['OrderNo', 'MerchantNo', 'MerchantOrderNo', 'PayTime', 'state']);
    expect(ok).toMatchObject({ MerchantOrderNo: 'R-2', state: 4 });
    expect(ok!.PayTime).toMatch(PAY_TIME);
    expect(refused).toMatchObject({ MerchantOrderNo: 'R-3', state: 5, PayTime: null });
  });

  it('splits a record into several RSA blocks when forced, and each block decrypts on its own', async () => {
    const sim = app.sandbox;
    sim.createPayin({
      merchantOrderNo: 'R-4',
      currency: 'KWD',
      amount: '12.345',
      callbackUrl: receiver.url,
      faults: { minBlocks: 3 },
    });
    await sim.settled(sim.finalize('R-4', 6).deliveries[0]!);
    const got = receiver.received[0]!;
    expect(got.blocks).toBe(3);
    expect(Buffer.from(JSON.parse(got.body).encryptedData, 'base64')).toHaveLength(3 * 256);
    expect(got.parsed).toMatchObject({ MerchantOrderNo: 'R-4', OrderState: 6, FiatCurrency: 12.345 });

    // The global switch does the same for every order, and the pipeline's own codec reads the result.
    sim.setFaults({ minBlocks: 2 });
    sim.createPayout({ merchantOrderNo: 'R-5', currency: 'KWD', amount: '1', callbackUrl: receiver.url });
    await sim.settled(sim.finalize('R-5', 4).deliveries[0]!);
    const second = receiver.received[1]!;
    expect(second.blocks).toBe(2);
    const decoded = decodeCallback(JSON.parse(second.body), {
      keyRing: loadKeyRing([testKeys().privateKeyPem]),
      merchantNo: MERCHANT_NO,
    });
    expect(decoded).toMatchObject({ kind: 'payout', merchantOrderNo: 'R-5', state: 4 });
  });

  it('encrypts each attempt afresh, so retries carry different ciphertexts of the same record', async () => {
    const sim = app.sandbox;
    const flaky = await startReceiver((n) => (n === 0 ? { status: 500, body: 'no' } : { status: 200, body: 'ok' }));
    try {
      sim.createPayin({ merchantOrderNo: 'R-6', currency: 'INR', amount: '5', callbackUrl: flaky.url });
      await sim.settled(sim.finalize('R-6', 6).deliveries[0]!);
      const [a, b] = flaky.received;
      expect(a!.record).toBe(b!.record);
      expect(a!.body).not.toBe(b!.body);
    } finally {
      await flaky.close();
    }
  });
});
