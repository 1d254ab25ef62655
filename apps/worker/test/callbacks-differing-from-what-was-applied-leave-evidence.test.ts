import { createOrder, payinEvent, platformOrder, uid, waitFor, type FakePlatform, type TestEnv } from '@mcb/testkit';
import { orderState, workerTest, type Harness } from '@mcb/testkit/worker';
import type { CallbackJobInput } from '@mcb/core/queue';
import { beforeEach, describe, expect } from 'vitest';
import type { AlertMessage, Alerter } from '../src/alerts.ts';

type PayinInput = Extract<CallbackJobInput, { kind: 'payin' }>;

// Issue 37: a callback for a pair that already has a receipt, or for an order already final, used to end as a plain
// duplicate whatever it carried. Now it is compared with what was applied: a copy stays a duplicate (no alarm), a
// callback with other content is evidence (review, alert, metric).
const alerts: AlertMessage[] = [];
const alerter: Alerter = { notify: (m) => void alerts.push(m), close: async () => {} };
const it = workerTest.extend('harnessOptions', { scope: 'file' }, { alerts: alerter });
beforeEach(() => {
  alerts.length = 0;
});

const forgeries = async (h: Harness, against: 'receipt' | 'order') =>
  (await h.metrics.suspectedForgeries.get()).values.find(
    (v) => v.labels.kind === 'payin' && v.labels.against === against,
  )?.value ?? 0;

/** A pay-in of 50.00, credited by its genuine callback. */
async function credited({ env, platform, h }: { env: TestEnv; platform: FakePlatform; h: Harness }) {
  const no = `PI-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '50.00' });
  platform.setOrder(
    platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '50.00' }),
  );
  const genuine = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '50.00' }) as PayinInput;
  const job = await h.settled((await h.add(genuine)).id!);
  expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
  return { no, genuine };
}

describe('a callback that meets what was already applied', () => {
  it('same pair, same content (a platform retry): a duplicate, no review, no alert, Get order not asked again', async ({
    env,
    platform,
    h,
  }) => {
    const { no, genuine } = await credited({ env, platform, h });
    const before = await forgeries(h, 'receipt');
    const hits = platform.hits.get(no);
    const job = await h.settled(
      (await h.add({ ...genuine, receivedAt: new Date().toISOString() }, `payin-P${no}-6-retry`)).id!,
    );
    expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });
    expect(platform.hits.get(no)).toBe(hits);
    expect((await orderState(env.db.db, no)).reviews).toHaveLength(0);
    expect(alerts).toEqual([]);
    expect(await forgeries(h, 'receipt')).toBe(before);
  });

  it('same pair, 9,999.99 instead of 50.00 after the credit: a review with both values, an alert and a metric, nothing paid', async ({
    env,
    platform,
    h,
  }) => {
    const { no, genuine } = await credited({ env, platform, h });
    const before = await forgeries(h, 'receipt');
    const hits = platform.hits.get(no);
    const forged = { ...genuine, fiatAmount: '9999.99', receivedAt: new Date().toISOString() };
    const job = await h.settled((await h.add(forged, `payin-P${no}-6-forged`)).id!);
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_DIFFERS_FROM_APPLIED', opened: true });
    // Judged on the look-up the worker makes anyway: no Get order round trip.
    expect(platform.hits.get(no)).toBe(hits);
    const s = await orderState(env.db.db, no);
    expect(s.ledger.map((l) => l.amount)).toEqual(['50.00']);
    expect(s.reviews).toHaveLength(1);
    expect(s.reviews[0]).toMatchObject({
      reasonCode: 'VERIFY_DIFFERS_FROM_APPLIED',
      status: 'open',
      details: expect.objectContaining({
        against: 'receipt',
        differences: [{ field: 'fiatAmount', callback: '9999.99', applied: '50.00' }],
      }),
    });
    expect(s.reviews[0]!.reason).toMatch(/9999\.99.*50\.00/);
    expect(alerts).toEqual([
      expect.objectContaining({
        type: 'review.opened',
        code: 'VERIFY_DIFFERS_FROM_APPLIED',
        orderNo: `P${no}`,
        state: 6,
      }),
    ]);
    expect(await forgeries(h, 'receipt')).toBe(before + 1);
  });

  it('a forgery with a made-up Quantity applied first: the genuine retries are duplicates, with a note naming both jobs', async ({
    env,
    platform,
    h,
  }) => {
    // Issue 48: Get order confirms the amount, not the Quantity, so the forgery moves the same money as the genuine
    // callback; flagging the genuine retries would point the alarm at the customer's real payment.
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '50.00' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '50.00' }),
    );
    const genuine = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '50.00' }) as PayinInput;
    const forgedId = `payin-P${no}-6`;
    const forged = await h.settled((await h.add({ ...genuine, quantity: '999.00' }, forgedId)).id!);
    expect(forged.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    const before = await forgeries(h, 'receipt');
    for (const id of [`${forgedId}-genuine`, `${forgedId}-genuine-retry`]) {
      const job = await h.settled((await h.add({ ...genuine, receivedAt: new Date().toISOString() }, id)).id!);
      expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });
    }
    const s = await orderState(env.db.db, no);
    expect(s.ledger.map((l) => l.amount)).toEqual(['50.00']);
    expect(s.reviews).toEqual([]);
    expect(alerts).toEqual([]);
    expect(await forgeries(h, 'receipt')).toBe(before);
    const { rows: notes } = await env.db.pool.query(
      `select job_id, applied_job_id, topic, detail, details, seen from order_notes where merchant_order_no = $1
        order by id`,
      [no],
    );
    expect(notes).toEqual(
      [`${forgedId}-genuine`, `${forgedId}-genuine-retry`].map((jobId) => ({
        job_id: jobId,
        applied_job_id: forgedId,
        topic: 'unconfirmed-field-differs',
        detail: expect.stringMatching(
          new RegExp(`job ${jobId} claims Quantity 17\\.3 \\(applied: 999\\.00\\).*job ${forgedId}`),
        ),
        details: { differences: [{ field: 'quantity', callback: '17.3', applied: '999.00' }] },
        seen: 1,
      })),
    );
  });

  it("a callback with another merchant number for an applied pair is that merchant's: its order is unknown, ours untouched", async ({
    env,
    platform,
    h,
  }) => {
    // Issue 50: receipts and orders are keyed by merchant (the platform may reuse an OrderNo across merchant numbers),
    // so it is not compared with our receipt: it looks for M-OTHER's order of that number, which does not exist, and
    // goes to review in M-OTHER's name once its grace period is over (here, already: it was received long ago).
    const { no, genuine } = await credited({ env, platform, h });
    const longAgo = new Date(Date.now() - 3600_000).toISOString();
    const job = await h.settled(
      (await h.add({ ...genuine, merchantNo: 'M-OTHER', receivedAt: longAgo }, `payin-P${no}-6-merchant`)).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_ORDER_UNKNOWN' });
    const s = await orderState(env.db.db, no);
    expect(s.reviews).toEqual([expect.objectContaining({ merchantNo: 'M-OTHER', status: 'open' })]);
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts.map((r) => r.merchantNo)).toEqual([genuine.merchantNo]);
  });

  it('a state-3 callback at 123,456.00 after state 6 was applied: a review against the order, Get order not asked', async ({
    env,
    platform,
    h,
  }) => {
    const { no, genuine } = await credited({ env, platform, h });
    const before = await forgeries(h, 'order');
    const hits = platform.hits.get(no);
    const job = await h.settled((await h.add({ ...genuine, state: 3, fiatAmount: '123456.00' })).id!);
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_DIFFERS_FROM_APPLIED', opened: true });
    expect(platform.hits.get(no)).toBe(hits);
    const s = await orderState(env.db.db, no);
    expect(s.ledger).toHaveLength(1);
    expect(s.reviews[0]).toMatchObject({
      state: 3,
      details: expect.objectContaining({
        against: 'order',
        differences: [{ field: 'fiatAmount', callback: '123456.00', applied: '50.00' }],
      }),
    });
    expect(alerts).toEqual([
      expect.objectContaining({ type: 'review.opened', code: 'VERIFY_DIFFERS_FROM_APPLIED', state: 3 }),
    ]);
    expect(await forgeries(h, 'order')).toBe(before + 1);
  });

  it('a state-3 callback with the applied content after state 6: a duplicate (already final), no alarm', async ({
    env,
    platform,
    h,
  }) => {
    const { no, genuine } = await credited({ env, platform, h });
    const job = await h.settled((await h.add({ ...genuine, state: 3, fiatAmount: '50' })).id!);
    expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'already-final' });
    expect((await orderState(env.db.db, no)).reviews).toHaveLength(0);
    expect(alerts).toEqual([]);
  });

  it('a forgery that waited while Get order said "not final" and meets the genuine credit later is judged the same way', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '50.00' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 1, amountJson: '50.00' }),
    );
    const forged = await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '9999.99' }));
    // 1. The forgery waits (VERIFY_NOT_FINAL); hold its next attempt back.
    await waitFor(
      async () => {
        const job = await h.queue.getJob(forged.id!);
        if (!job || job.attemptsMade < 1) return false;
        // changeDelay refuses a job that is not delayed (its next attempt started meanwhile): try again.
        return job.changeDelay(60_000).then(
          () => true,
          () => false,
        );
      },
      { message: 'the forgery did not wait' },
    );
    expect((await orderState(env.db.db, no)).reviews).toHaveLength(0);
    // 2. The payment completes and the genuine callback is credited.
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '50.00' }),
    );
    const genuine = await h.settled(
      (
        await h.add(
          payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '50.00' }),
          `payin-P${no}-6-genuine`,
        )
      ).id!,
    );
    expect(genuine.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    // 3. The forgery's next attempt meets the applied pair.
    await (await h.queue.getJob(forged.id!))!.promote();
    const job = await h.settled(forged.id!);
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_DIFFERS_FROM_APPLIED' });
    const s = await orderState(env.db.db, no);
    expect(s.ledger.map((l) => l.amount)).toEqual(['50.00']);
    expect(s.reviews[0]!.details).toMatchObject({
      differences: [{ field: 'fiatAmount', callback: '9999.99', applied: '50.00' }],
    });
    expect(alerts).toEqual([expect.objectContaining({ type: 'review.opened', code: 'VERIFY_DIFFERS_FROM_APPLIED' })]);
  });
});
