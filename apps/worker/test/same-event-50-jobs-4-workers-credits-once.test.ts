import { createOrder, MERCHANT_NO, payinEvent, payoutEvent, platformOrder, uid } from '@mcb/testkit';
import { orderState, workerTest } from '@mcb/testkit/worker';
import { describe, expect } from 'vitest';
import { callbackJobSchema } from '@mcb/core/queue';
import { commitEvent } from '@mcb/settlement';
import { findOrder } from '@mcb/settlement';

// Four independent worker instances (own Redis connection and Postgres pool each), 8 jobs at once each.
const it = workerTest.extend('harnessOptions', { scope: 'file' }, { instances: 4, concurrency: 8 });

describe('the Postgres constraint, not the queue, is the guard against double credit', () => {
  it('credits once when the same pay-in is queued 50 times under distinct job ids and run by 4 workers at once', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '300' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '300' }),
    );
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '300' });

    // 1. Distinct job ids, so the queue cannot collapse them: 50 jobs really exist.
    const ids = Array.from({ length: 50 }, (_, i) => `dup-${no}-${i}`);
    await h.queue.addBulk(
      ids.map((jobId) => ({
        name: 'payin',
        data: event,
        opts: { jobId, attempts: 60, backoff: { type: 'callback-backoff' } },
      })),
    );
    const jobs = await Promise.all(ids.map((id) => h.settled(id, 30_000)));

    // 2. Every job completed; exactly one applied the credit, the others saw a duplicate.
    const outcomes = jobs.map((j) => j.returnvalue as { status: string });
    expect(jobs.every((j) => j.failedReason === undefined || j.failedReason === null)).toBe(true);
    expect(outcomes.filter((o) => o.status === 'applied')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 'duplicate')).toHaveLength(49);
    // 3. More than one worker instance took part.
    const byWorker = new Set(jobs.map((j) => j.processedBy));
    expect(byWorker.size).toBeGreaterThan(1);

    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('credited');
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toHaveLength(1);
    expect(s.events).toHaveLength(1);
  });

  it('refunds a refused payout once under the same race', async ({ env, platform, h }) => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '12.5' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 5, amountJson: '12.50' }),
    );
    const event = payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state: 5 });
    const ids = Array.from({ length: 50 }, (_, i) => `dup-${no}-${i}`);
    await h.queue.addBulk(
      ids.map((jobId) => ({
        name: 'payout',
        data: event,
        opts: { jobId, attempts: 60, backoff: { type: 'callback-backoff' } },
      })),
    );
    await Promise.all(ids.map((id) => h.settled(id, 30_000)));
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('refused');
    expect(s.ledger).toHaveLength(1);
    expect(s.ledger[0]).toMatchObject({ entryType: 'payout_refund', amount: '12.5' });
  });

  it('lets exactly one of 20 concurrent transactions for the same pair commit, even with the early receipt check skipped', async ({
    env,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '9' });
    const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
    const event = callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '9' }));
    const confirmed = {
      orderNo: `P${no}`,
      merchantNo: event.merchantNo,
      merchantOrderNo: no,
      type: 'payin' as const,
      state: 6,
      amount: '9',
      currency: 'PHP',
    };
    const results = await Promise.all(
      Array.from({ length: 20 }, () => commitEvent(env.db.db, { event, order, confirmed, target: 'credited' })),
    );
    expect(results.filter((r) => r.status === 'applied')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'duplicate')).toHaveLength(19);
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });
});
