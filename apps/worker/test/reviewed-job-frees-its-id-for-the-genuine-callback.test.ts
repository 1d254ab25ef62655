import { createOrder, payinEvent, platformOrder, uid, waitFor } from '@mcb/testkit';
import { orderState, workerTest } from '@mcb/testkit/worker';
import { describe, expect } from 'vitest';

// The contract's job id is {kind}-{OrderNo}-{state}. A forged callback for a real pair that reaches review first
// must not keep that id taken: the genuine callback arriving later has to make a job of its own and be credited
// now, not at the next reconciliation sweep.
const it = workerTest.extend('harnessOptions', { scope: 'file' }, { releaseReviewedJobIds: true });

describe('a reviewed job releases its id', () => {
  it('credits the genuine callback that arrives after a forged one of the same pair went to review', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    const orderNo = `P${no}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100' });
    platform.setOrder(platformOrder({ orderNo, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100' }));

    // 1. The forgery: the real pair (OrderNo, 6) with ten times the amount. Get order contradicts it → review.
    const forged = await h.add(payinEvent({ orderNo, merchantOrderNo: no, fiatAmount: '1000' }));
    await waitFor(async () => (await orderState(env.db.db, no)).reviews.length === 1, { message: 'forgery reviewed' });
    // 2. Its job is removed once completed, so the id is free.
    await waitFor(async () => (await h.queue.getJob(forged.id!)) === undefined, { message: 'reviewed job released' });

    // 3. The genuine callback of the same pair gets the same contract id, a new job, and the credit.
    const genuine = await h.add(payinEvent({ orderNo, merchantOrderNo: no, fiatAmount: '100' }));
    expect(genuine.id).toBe(forged.id);
    await waitFor(async () => (await orderState(env.db.db, no)).order.status === 'credited', { message: 'credited' });
    const s = await orderState(env.db.db, no);
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toHaveLength(1);
    // The review of the forgery stays open (evidence for a person): the genuine event applied is not its event.
    expect(s.reviews[0]).toMatchObject({ status: 'open', reasonCode: 'VERIFY_AMOUNT_MISMATCH' });
  });

  it('keeps applied jobs, so a late duplicate collapses onto them: no new job, no second run, one credit', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    const orderNo = `P${no}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '7' });
    platform.setOrder(platformOrder({ orderNo, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '7' }));
    const first = payinEvent({ orderNo, merchantOrderNo: no, fiatAmount: '7', receivedAt: '2026-01-01T00:00:00.000Z' });
    const job = await h.settled((await h.add(first)).id!);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    const ran: string[] = [];
    const onActive = (j: { id?: string }) => ran.push(j.id ?? '');
    h.workers[0]!.on('active', onActive);
    try {
      // The platform retries the same callback an hour later: same pair, same contract job id.
      const late = await h.add({ ...first, receivedAt: '2026-01-01T01:00:00.000Z' });
      expect(late.id).toBe(job.id);
      // The add found the id taken by the completed job: nothing new to wait for, the job as it was.
      expect(await h.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized')).toEqual({
        waiting: 0,
        active: 0,
        delayed: 0,
        prioritized: 0,
      });
      const kept = (await h.queue.getJob(job.id!))!;
      expect(await kept.getState()).toBe('completed');
      expect({
        timestamp: kept.timestamp,
        processedOn: kept.processedOn,
        finishedOn: kept.finishedOn,
        attemptsMade: kept.attemptsMade,
      }).toEqual({
        timestamp: job.timestamp,
        processedOn: job.processedOn,
        finishedOn: job.finishedOn,
        attemptsMade: 1,
      });
      expect(kept.data.receivedAt).toBe(first.receivedAt);
      expect(kept.returnvalue).toEqual(job.returnvalue);
    } finally {
      h.workers[0]!.off('active', onActive);
    }
    expect(ran).toEqual([]);
    const s = await orderState(env.db.db, no);
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toHaveLength(1);
  });
});
