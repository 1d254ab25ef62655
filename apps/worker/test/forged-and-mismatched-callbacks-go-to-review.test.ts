import { callbackJobOptions } from '@mcb/core/queue';
import { createOrder, payinEvent, platformOrder, uid, waitFor } from '@mcb/testkit';
import { orderState, reviewsFor, workerTest } from '@mcb/testkit/worker';
import { describe, expect } from 'vitest';

// Waiting bounds of a second or two instead of 15 minutes and 2 hours.
const it = workerTest.extend('harnessOptions', { scope: 'file' }, { orderGracePeriodMs: 2500, confirmMaxWaitMs: 1000 });

describe('nothing is credited unless Get order confirms it', () => {
  it('retries while Get order reports a non-final state, then opens a review VERIFY_NOT_FINAL', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 1, amountJson: '100' }),
    );
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '100' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_NOT_FINAL' });
    expect(job.attemptsMade).toBeGreaterThan(1);
    expect(platform.hits.get(no)).toBeGreaterThan(1);
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('pending');
    expect(s.ledger).toHaveLength(0);
    expect(s.receipts).toHaveLength(0);
    expect(s.reviews[0]).toMatchObject({ reasonCode: 'VERIFY_NOT_FINAL', status: 'open' });
  });

  it('sends a callback whose amount Get order contradicts to review at once, without retrying', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100' }),
    );
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '1000' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_AMOUNT_MISMATCH' });
    expect(job.attemptsMade).toBe(1);
    expect(platform.hits.get(no)).toBe(1);
    const s = await orderState(env.db.db, no);
    expect(s.ledger).toHaveLength(0);
    expect(s.reviews[0]!.reason).toMatch(/100.*1000/);
  });

  it('sends a confirmed amount that differs from our own order to review VERIFY_OWN_AMOUNT_MISMATCH', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '99.99' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100' }),
    );
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '100' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_OWN_AMOUNT_MISMATCH' });
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('pending');
    expect(s.ledger).toHaveLength(0);
    expect(s.reviews[0]!.details).toMatchObject({ confirmedAmount: '100', ownAmount: '99.99' });
  });

  it('sends a callback in another currency than our order to review', async ({ env, platform, h }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100', currency: 'PHP' });
    platform.setOrder(
      platformOrder({
        orderNo: `P${no}`,
        merchantOrderNo: no,
        type: 'payin',
        state: 6,
        amountJson: '100',
        currency: 'USD',
      }),
    );
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '100' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_CURRENCY_MISMATCH' });
  });

  it('waits for an order registered after its callback, then credits it', async ({ env, platform, h }) => {
    const no = `PI-${uid()}`;
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '5' }),
    );
    const added = await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '5' }));
    // 1. The first attempt finds no order and is deferred (retried with backoff).
    await waitFor(async () => ((await h.queue.getJob(added.id!))?.attemptsMade ?? 0) >= 1, {
      message: 'first attempt deferred',
    });
    // 2. The order is registered within the grace period.
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '5' });
    const job = await h.settled(added.id!);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });

  it('opens a review VERIFY_ORDER_UNKNOWN when the order never appears within the grace period', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '5' }),
    );
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '5' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_ORDER_UNKNOWN' });
    expect(job.attemptsMade).toBeGreaterThan(1);
    expect(platform.hits.get(no)).toBeUndefined(); // never confirmed an order we do not have
    const reviews = await reviewsFor(env.db.db, no);
    expect(reviews).toHaveLength(1);
  });

  it('counts the grace period from receivedAt, so a restarted job does not wait again', async ({ h }) => {
    const no = `PI-${uid()}`;
    const longAgo = new Date(Date.now() - 60_000).toISOString();
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '5', receivedAt: longAgo }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_ORDER_UNKNOWN' });
    expect(job.attemptsMade).toBe(1);
  });

  it('treats a Get order refusal (envelope code != 0) as unconfirmed: retries, then review with the platform code', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '7' });
    platform.refuse(no, 40404, 'order not found');
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '7' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'PLATFORM_ERROR_CODE' });
    expect(job.attemptsMade).toBeGreaterThan(1);
    const s = await orderState(env.db.db, no);
    expect(s.reviews[0]).toMatchObject({
      reasonCode: 'PLATFORM_ERROR_CODE',
      details: expect.objectContaining({ platformCode: 40404 }),
    });
    expect(s.ledger).toHaveLength(0);
  });

  it('treats a Get order HTTP 4xx (a proxy, a maintenance page) as unconfirmed: asks again and credits once it answers', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '7' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '7' }),
    );
    platform.failNext(no, 1, 401);
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '7' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBeGreaterThan(1);
    const s = await orderState(env.db.db, no);
    expect(s.ledger).toHaveLength(1);
    expect(s.reviews).toHaveLength(0);
  });

  it('opens a review PLATFORM_HTTP_ERROR, with the status, when Get order keeps answering 4xx beyond CONFIRM_MAX_WAIT', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '7' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '7' }),
    );
    platform.failNext(no, 1000, 403);
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '7' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'PLATFORM_HTTP_ERROR' });
    expect(job.attemptsMade).toBeGreaterThan(1);
    const s = await orderState(env.db.db, no);
    expect(s.reviews[0]).toMatchObject({
      reasonCode: 'PLATFORM_HTTP_ERROR',
      details: expect.objectContaining({ status: 403 }),
    });
    expect(s.ledger).toHaveLength(0);
  });

  it('fails an invalid job payload at once with JOB_PAYLOAD_INVALID', async ({ h }) => {
    const jobId = `bad-${uid()}`;
    await h.queue.add('payin', { kind: 'payin', orderNo: '' } as never, { ...callbackJobOptions, jobId });
    const job = await h.settled(jobId);
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toMatch(/^JOB_PAYLOAD_INVALID: /);
  });

  it('keeps one open review per event and counts how often it was seen', async ({ env, platform, h }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100' }),
    );
    const forged = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '1' });
    await h.settled((await h.add(forged, `a-${no}`)).id!);
    await h.settled((await h.add(forged, `b-${no}`)).id!);
    const reviews = await reviewsFor(env.db.db, no);
    expect(reviews).toHaveLength(1);
    expect(reviews[0]!.occurrences).toBe(2);
  });
});
