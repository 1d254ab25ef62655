import { useTestEnv, waitFor } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPipeline, type Pipeline } from './helpers/pipeline.ts';

// Sandbox → ingest → BullMQ → worker → Postgres, for the flows that move money: a pay-in is credited once however
// many copies of its callback arrive, a record split over several RSA blocks is read like any other, a payout
// reaching 4 succeeds without a ledger entry, and one reaching 5 is refunded once.
describe('callbacks credit and finalise once, end to end', () => {
  const env = useTestEnv();
  let p: Pipeline;

  beforeAll(async () => {
    p = await startPipeline(env);
  });
  afterAll(async () => {
    await p?.close();
  });

  /** Wait until the queue has nothing left to do for this file. */
  async function drained(): Promise<void> {
    await waitFor(
      async () => {
        const c = await p.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        return Object.values(c).every((n) => n === 0);
      },
      { message: 'queue not drained' },
    );
  }

  it('credits a released pay-in exactly once although every attempt arrives four times', async () => {
    // 1. The shop registers the order; the customer pays; the platform sends each attempt in four copies.
    await p.registerPayin('E2E-DUP-1', '1000.10');
    const order = p.sim.createPayin({
      merchantOrderNo: 'E2E-DUP-1',
      currency: 'INR',
      amount: '1000.10',
      faults: { duplicate: 4 },
    });
    const [delivery] = p.sim.finalize(order.orderNo, 6).deliveries;
    const settled = await p.sim.settled(delivery!);

    // 2. Ingest acknowledged all four copies of attempt 1, so the platform stops.
    expect(settled.status).toBe('delivered');
    expect(settled.attempts.map((a) => [a.number, a.status, a.bodySnippet])).toEqual(
      [1, 2, 3, 4].map(() => [1, 200, 'success']),
    );

    // 3. One credit, one receipt, for the exact amount (the console stores amounts normalised: 1000.10 → 1000.1).
    await waitFor(async () => (await p.orderState('E2E-DUP-1')).status === 'credited', {
      message: 'pay-in not credited',
    });
    await drained();
    const state = await p.orderState('E2E-DUP-1');
    expect(state.ledger).toEqual([{ entryType: 'payin_credit', amount: '1000.1' }]);
    expect(state.receipts).toEqual([{ orderNo: order.orderNo, state: 6 }]);
    expect(state.reviews).toEqual([]);
    const jobs = await p.queue.getJobs(['completed', 'failed']);
    expect(jobs.filter((j) => j.id?.includes(order.orderNo)).map((j) => j.id)).toEqual([`payin-${order.orderNo}-6`]);
  });

  it('credits a pay-in whose record is split over four RSA blocks', async () => {
    await p.registerPayin('E2E-BLOCKS-1', '77.70');
    const order = p.sim.createPayin({
      merchantOrderNo: 'E2E-BLOCKS-1',
      currency: 'INR',
      amount: '77.70',
      faults: { minBlocks: 4 },
    });
    const [delivery] = p.sim.finalize(order.orderNo, 6).deliveries;
    expect((await p.sim.settled(delivery!)).status).toBe('delivered');
    await waitFor(async () => (await p.orderState('E2E-BLOCKS-1')).status === 'credited', {
      message: 'multi-block pay-in not credited',
    });
    expect((await p.orderState('E2E-BLOCKS-1')).ledger).toEqual([{ entryType: 'payin_credit', amount: '77.7' }]);
  });

  it('marks a payout that reached 4 succeeded, with no ledger entry', async () => {
    await p.registerPayout('E2E-PO-OK', '500.00');
    const order = p.sim.createPayout({ merchantOrderNo: 'E2E-PO-OK', currency: 'INR', amount: '500.00' });
    const [delivery] = p.sim.finalize(order.orderNo, 4).deliveries;
    expect((await p.sim.settled(delivery!)).status).toBe('delivered');
    await waitFor(async () => (await p.orderState('E2E-PO-OK')).status === 'succeeded', {
      message: 'payout not succeeded',
    });
    await drained();
    const state = await p.orderState('E2E-PO-OK');
    expect(state.ledger).toEqual([]);
    expect(state.receipts).toEqual([{ orderNo: order.orderNo, state: 4 }]);
  });

  it('refunds a refused payout (state 5) once, even when the callback is sent three times', async () => {
    await p.registerPayout('E2E-PO-REFUSED', '320.55');
    const order = p.sim.createPayout({
      merchantOrderNo: 'E2E-PO-REFUSED',
      currency: 'INR',
      amount: '320.55',
      faults: { duplicate: 3 },
    });
    const [delivery] = p.sim.finalize(order.orderNo, 5).deliveries;
    expect((await p.sim.settled(delivery!)).status).toBe('delivered');
    await waitFor(async () => (await p.orderState('E2E-PO-REFUSED')).status === 'refused', {
      message: 'payout not refused',
    });
    await drained();
    const state = await p.orderState('E2E-PO-REFUSED');
    expect(state.ledger).toEqual([{ entryType: 'payout_refund', amount: '320.55' }]);
    expect(state.receipts).toEqual([{ orderNo: order.orderNo, state: 5 }]);
  });

  it('leaves a payout created in the platform console without any callback, so it stays pending', async () => {
    await p.registerPayout('E2E-PO-CONSOLE', '10.00');
    const order = p.sim.createPayout({
      merchantOrderNo: 'E2E-PO-CONSOLE',
      currency: 'INR',
      amount: '10.00',
      createdVia: 'console',
    });
    expect(p.sim.finalize(order.orderNo, 4).deliveries).toEqual([]);
    await drained();
    expect((await p.orderState('E2E-PO-CONSOLE')).status).toBe('pending');
  });
});
