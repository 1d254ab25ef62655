import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { PayinState } from '@mcb/core/spec';
import { createOrder, startFakePlatform, uid, useTestEnv, waitFor, type FakePlatform } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';
import { startHarness, type Harness } from '@mcb/testkit/worker';

// Finding: a forged record for a real (OrderNo, state) sent first took the contract job id; the genuine callback
// then got `success` but collapsed onto the forged job, which went to review, and the order waited for the sweep.
const env = useTestEnv();
const keys = generateKeyPair();
let platform: FakePlatform;
let ingest: TestIngest;
let worker: Harness | undefined;

beforeAll(async () => {
  platform = await startFakePlatform();
  ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: env.prefix,
    keyRing: loadKeyRing([keys.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true' },
  });
});
afterAll(async () => {
  await worker?.close();
  await ingest?.close();
  await platform?.close();
});

const callback = (orderNo: string, merchantOrderNo: string, amount: string) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      `{"OrderNo":"${orderNo}","MerchantNo":"${MERCHANT_NO}","MerchantOrderNo":"${merchantOrderNo}","PayTime":"2026-01-02T03:04:05","OrderState":6,"Quantity":1.5,"FiatCurrency":${amount}}`,
      keys.publicKeyPem,
    ),
  });
const post = async (payload: string) => {
  const res = await ingest.app.inject({
    method: 'POST',
    url: '/callbacks/payin',
    headers: { 'content-type': 'application/json' },
    payload,
  });
  return `${res.statusCode} ${res.body}`;
};

describe('a forged callback sent before the genuine one', () => {
  it('does not swallow it: the genuine record gets its own job and is credited without waiting for the sweep', async () => {
    const no = uid();
    const [orderNo, merchantOrderNo] = [`P-FG-${no}`, `M-FG-${no}`];
    await createOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo, kind: 'payin', amount: '10' });
    platform.setOrder({
      orderNo,
      merchantNo: MERCHANT_NO,
      merchantOrderNo,
      type: 'payin',
      state: PayinState.Released,
      amountJson: '10',
      currency: 'PHP',
    });

    expect(await post(callback(orderNo, merchantOrderNo, '1000'))).toBe('200 success'); // forged: a hundred times the amount
    expect(await post(callback(orderNo, merchantOrderNo, '10'))).toBe('200 success'); // genuine
    expect(await post(callback(orderNo, merchantOrderNo, '10'))).toBe('200 success'); // the platform's retry of it
    // Two jobs: the forged one under the contract id, the genuine one under the contract id plus its digest.
    const jobs = await ingest.queue.getJobs(['waiting']);
    const mine = jobs.filter((j) => j.data.orderNo === orderNo);
    expect(mine.map((j) => j.data.fiatAmount).sort()).toEqual(['10', '1000']);
    expect(mine.find((j) => j.data.fiatAmount === '1000')?.id).toBe(`payin-${orderNo}-6`);
    expect(mine.find((j) => j.data.fiatAmount === '10')?.id).toMatch(new RegExp(`^payin-${orderNo}-6-[0-9a-f]{16}$`));

    worker = await startHarness(env, platform.url);
    await waitFor(
      async () =>
        (await env.db.pool.query(`select status from orders where merchant_order_no = $1`, [merchantOrderNo])).rows[0]
          ?.status === 'credited',
      {
        timeoutMs: 15_000,
        message: 'the genuine callback was not credited',
      },
    );
    const { rows: ledger } = await env.db.pool.query(
      `select l.amount from ledger_entries l join orders o on o.id = l.order_id where o.merchant_order_no = $1`,
      [merchantOrderNo],
    );
    expect(ledger).toEqual([{ amount: '10' }]);
    const forged = await worker.settled(`payin-${orderNo}-6`);
    // Never a silent duplicate: Get order contradicts it (VERIFY_AMOUNT_MISMATCH) or it differs from the credit (VERIFY_DIFFERS_FROM_APPLIED).
    expect(forged.returnvalue).toMatchObject({
      status: 'review',
      code: expect.stringMatching(/^VERIFY_(AMOUNT_MISMATCH|DIFFERS_FROM_APPLIED)$/),
    });
  });
});
