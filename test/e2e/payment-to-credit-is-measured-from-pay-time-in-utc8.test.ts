import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { createMetricsRegistry } from '@mcb/core/metrics';
import { createReconcileMetrics } from '@mcb/settlement';
import {
  createOrder,
  platformOrder,
  startFakePlatform,
  uid,
  useTestEnv,
  waitFor,
  type FakePlatform,
} from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';
import { startHarness, type Harness } from '@mcb/testkit/worker';

// Issue 37: nothing measured how long a customer waits from payment to credit. mcb_payment_to_credit_seconds runs
// from the record's PayTime, which the platform sends as UTC+8 local time without an offset, to the credit's commit.
const env = useTestEnv();
const keys = generateKeyPair();
let platform: FakePlatform;
let ingest: TestIngest;
let worker: Harness;

beforeAll(async () => {
  platform = await startFakePlatform();
  ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: env.prefix,
    keyRing: loadKeyRing([keys.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true' },
  });
  worker = await startHarness(env, platform.url);
});
afterAll(async () => {
  await worker?.close();
  await ingest?.close();
  await platform?.close();
});

/** `yyyy-MM-ddTHH:mm:ss` in UTC+8 for an instant, as the platform writes PayTime. */
const utc8 = (ms: number) => new Date(ms + 8 * 3600_000).toISOString().slice(0, 19);

describe('mcb_payment_to_credit_seconds', () => {
  it('observes PayTime (UTC+8) to the commit of the credit, by kind: 90 s, not 8 hours and 90 s', async () => {
    const no = uid();
    const [orderNo, merchantOrderNo] = [`P-PT-${no}`, `M-PT-${no}`];
    await createOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo, kind: 'payin', amount: '10' });
    platform.setOrder(
      platformOrder({ orderNo, merchantNo: MERCHANT_NO, merchantOrderNo, type: 'payin', state: 6, amountJson: '10' }),
    );
    const paidAt = Date.now() - 90_000;
    const record = `{"OrderNo":"${orderNo}","MerchantNo":"${MERCHANT_NO}","MerchantOrderNo":"${merchantOrderNo}","PayTime":"${utc8(paidAt)}","OrderState":6,"Quantity":1.5,"FiatCurrency":10}`;
    const res = await ingest.app.inject({
      method: 'POST',
      url: '/callbacks/payin',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ encryptedData: encryptRecord(record, keys.publicKeyPem) }),
    });
    expect(`${res.statusCode} ${res.body}`).toBe('200 success');
    await waitFor(
      async () =>
        (await env.db.pool.query(`select status from orders where merchant_order_no = $1`, [merchantOrderNo])).rows[0]
          ?.status === 'credited',
      {
        message: 'not credited',
      },
    );
    const { values } = await worker.metrics.paymentToCredit.get();
    const of = (name: string, le?: number) =>
      values.find(
        (v) =>
          v.metricName === name &&
          v.labels.kind === 'payin' &&
          (le === undefined || (v.labels as Record<string, unknown>).le === le),
      )?.value;
    expect(of('mcb_payment_to_credit_seconds_count')).toBe(1);
    const seconds = of('mcb_payment_to_credit_seconds_sum')!;
    expect(seconds).toBeGreaterThanOrEqual(89);
    expect(seconds).toBeLessThan(120);
    expect(of('mcb_payment_to_credit_seconds_bucket', 60)).toBe(0);
    expect(of('mcb_payment_to_credit_seconds_bucket', 120)).toBe(1);
    // Beside it, our own share of the wait: from the callback's arrival at ingest, not from the payment.
    const arrival = (await worker.metrics.callbackToCredit.get()).values.filter((v) => v.labels.kind === 'payin');
    expect(arrival.find((v) => v.metricName === 'mcb_callback_to_credit_seconds_count')?.value).toBe(1);
    expect(arrival.find((v) => v.metricName === 'mcb_callback_to_credit_seconds_sum')?.value).toBeLessThan(30);
  });

  it('a PayTime outside [order created - 5 min, callback arrived + 5 min] is not measured: a forged one cannot fire PaymentToCreditSlow', async () => {
    // Issue 48: Get order does not confirm PayTime; a forged callback applied first would otherwise put a days-old
    // payment into the histogram. Each callback below is credited; only the plausible one is observed.
    const count = async () =>
      (await worker.metrics.paymentToCredit.get()).values.find(
        (v) => v.metricName === 'mcb_payment_to_credit_seconds_count' && v.labels.kind === 'payin',
      )?.value ?? 0;
    const credit = async (paidAt: number) => {
      const no = uid();
      const [orderNo, merchantOrderNo] = [`P-PX-${no}`, `M-PX-${no}`];
      await createOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo, kind: 'payin', amount: '10' });
      platform.setOrder(
        platformOrder({ orderNo, merchantNo: MERCHANT_NO, merchantOrderNo, type: 'payin', state: 6, amountJson: '10' }),
      );
      const record = `{"OrderNo":"${orderNo}","MerchantNo":"${MERCHANT_NO}","MerchantOrderNo":"${merchantOrderNo}","PayTime":"${utc8(paidAt)}","OrderState":6,"Quantity":1.5,"FiatCurrency":10}`;
      const res = await ingest.app.inject({
        method: 'POST',
        url: '/callbacks/payin',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ encryptedData: encryptRecord(record, keys.publicKeyPem) }),
      });
      expect(`${res.statusCode} ${res.body}`).toBe('200 success');
      await waitFor(
        async () =>
          (await env.db.pool.query(`select status from orders where merchant_order_no = $1`, [merchantOrderNo])).rows[0]
            ?.status === 'credited',
        { message: 'not credited' },
      );
    };
    const before = await count();
    await credit(Date.now() - 3 * 86_400_000); // three days before the order was created
    await credit(Date.now() + 86_400_000); // a day after the callback arrived
    expect(await count()).toBe(before);
    // The other side of the bound: paid four minutes "before" the order was created (clock skew) is measured.
    await credit(Date.now() - 4 * 60_000);
    expect(await count()).toBe(before + 1);
  });

  it("the sweep's recovered counter exists at 0 from the start, so CallbacksLost sees the first lost callback", async () => {
    const registry = createMetricsRegistry('reconcile-test');
    createReconcileMetrics(registry);
    const text = await registry.getSingleMetricAsString('mcb_reconcile_recovered_total');
    expect(text).toMatch(/mcb_reconcile_recovered_total\{kind="payin",outcome="credited"[^}]*\} 0/);
    expect(text).toMatch(/mcb_reconcile_recovered_total\{kind="payout",outcome="refused"[^}]*\} 0/);
  });
});
