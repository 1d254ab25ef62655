import { createOrder, payinEvent, payoutEvent, platformOrder, uid } from '@mcb/testkit';
import { orderState, workerTest as it } from '@mcb/testkit/worker';
import { describe, expect } from 'vitest';

describe('a confirmed callback is applied exactly once', () => {
  it('credits a valid pay-in once, with one ledger entry, one receipt and one outbox event', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100.50' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100.5' }),
    );

    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '100.50' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });

    // The same event again under another job id (a platform retry after the first job was removed).
    const again = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '100.50' }), `again-${no}`)).id!,
    );
    expect(again.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });

    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('credited');
    expect(s.order.platformOrderNo).toBe(`P${no}`);
    expect(s.ledger).toHaveLength(1);
    expect(s.ledger[0]).toMatchObject({ entryType: 'payin_credit', amount: '100.50', currency: 'PHP' });
    expect(s.receipts).toHaveLength(1);
    expect(s.receipts[0]).toMatchObject({
      state: 6,
      fiatAmount: '100.50',
      quantity: '17.3',
      confirmedAmount: '100.5',
      source: 'callback',
    });
    expect(s.events.map((e) => e.eventType)).toEqual(['payin.credited']);
  });

  it('compares amounts beyond float precision exactly (Get order sends a bare JSON number)', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '12345678901234567.89' });
    platform.setOrder(
      platformOrder({
        orderNo: `P${no}`,
        merchantOrderNo: no,
        type: 'payin',
        state: 6,
        amountJson: '12345678901234567.89',
      }),
    );
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '12345678901234567.89' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });

    // One cent off, invisible to a double, is a mismatch.
    const off = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: off, kind: 'payin', amount: '12345678901234567.89' });
    platform.setOrder(
      platformOrder({
        orderNo: `P${off}`,
        merchantOrderNo: off,
        type: 'payin',
        state: 6,
        amountJson: '12345678901234567.88',
      }),
    );
    const bad = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${off}`, merchantOrderNo: off, fiatAmount: '12345678901234567.89' }))).id!,
    );
    expect(bad.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_AMOUNT_MISMATCH' });
    expect((await orderState(env.db.db, off)).ledger).toHaveLength(0);
  });

  it('moves a payout confirmed as 4 to succeeded, with no ledger entry', async ({ env, platform, h }) => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '250' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 4, amountJson: '"250.00"' }),
    );
    const job = await h.settled((await h.add(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state: 4 }))).id!);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'succeeded' });
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('succeeded');
    expect(s.order.finalizedAt).not.toBeNull();
    expect(s.ledger).toHaveLength(0);
    expect(s.events.map((e) => e.eventType)).toEqual(['payout.succeeded']);
  });

  it('moves a payout confirmed as 5 to refused and posts a refund of the amount held', async ({ env, platform, h }) => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '75.25' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 5, amountJson: '75.25' }),
    );
    const job = await h.settled((await h.add(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state: 5 }))).id!);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'refused' });
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('refused');
    expect(s.ledger).toHaveLength(1);
    expect(s.ledger[0]).toMatchObject({ entryType: 'payout_refund', amount: '75.25' });
  });

  it('sends a 5 that follows an applied 4 for the same payout to review, and changes nothing', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '40' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 4, amountJson: '40' }),
    );
    await h.settled((await h.add(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state: 4 }))).id!);

    // 1. The platform now reports 5 as well: a real conflict between two final states.
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 5, amountJson: '40' }),
    );
    const second = await h.settled(
      (await h.add(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state: 5 }))).id!,
    );
    expect(second.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_CONFLICTING_FINAL_STATE' });
    expect(second.attemptsMade).toBe(1); // decided on the first attempt: no retry

    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('succeeded');
    expect(s.ledger).toHaveLength(0);
    expect(s.receipts.map((r) => r.state)).toEqual([4]);
    expect(s.reviews).toHaveLength(1);
    expect(s.reviews[0]).toMatchObject({ status: 'open', reasonCode: 'VERIFY_CONFLICTING_FINAL_STATE', state: 5 });
  });

  it('sends a forged 5 for a payout that Get order reports as 4 to review as a state mismatch', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '40' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 4, amountJson: '40' }),
    );
    const job = await h.settled((await h.add(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state: 5 }))).id!);
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_STATE_MISMATCH' });
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('pending');
    expect(s.ledger).toHaveLength(0);
  });

  it('treats a pay-in already credited through state 3 (a sweep) as done when the state-6 callback arrives', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '10' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 3, amountJson: '10' }),
    );
    const sweep = await h.settled(
      (
        await h.add({
          ...payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10', state: 3 }),
          source: 'reconcile',
        })
      ).id!,
    );
    expect(sweep.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '10' }),
    );
    const callback = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10' }))).id!,
    );
    expect(callback.returnvalue).toEqual({ status: 'duplicate', reason: 'already-final' });
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });
});
