import { useTestEnv, waitFor } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPipeline, type Pipeline } from './helpers/pipeline.ts';

// Callbacks are not signed: anyone with our public key can send one. Each forgery here is encrypted correctly, so
// ingest acknowledges it; the worker's Get order check must catch it, record a review and pay nothing.
describe('forged callbacks go to review and pay nothing', () => {
  const env = useTestEnv();
  let p: Pipeline;

  beforeAll(async () => {
    // Short waits so that an order we never registered is decided within the test, not after 15 minutes.
    p = await startPipeline(env, { orderGracePeriodMs: 300, confirmMaxWaitMs: 300 });
  });
  afterAll(async () => {
    await p?.close();
  });

  it('a "released" pay-in for ten times what the customer paid is reviewed, not credited', async () => {
    // 1. The customer paid 250.00 (state 3: Get order reports it, no callback is sent).
    await p.registerPayin('E2E-FORGE-AMOUNT', '250.00');
    const order = p.sim.createPayin({ merchantOrderNo: 'E2E-FORGE-AMOUNT', currency: 'INR', amount: '250.00' });
    p.sim.finalize(order.orderNo, 3);
    // 2. A forged state-6 record claims 2500.00.
    const forged = p.sim.forge({ what: 'amount', ref: order.orderNo });
    const settled = await p.sim.settled(forged);
    expect(settled.attempts[0]?.bodySnippet).toBe('success'); // ingest cannot tell; that is the worker's job

    await waitFor(async () => (await p.orderState('E2E-FORGE-AMOUNT')).reviews.length > 0, { message: 'no review' });
    const state = await p.orderState('E2E-FORGE-AMOUNT');
    expect(state.reviews).toEqual([{ reasonCode: 'VERIFY_AMOUNT_MISMATCH', state: 6, status: 'open' }]);
    expect(state.status).toBe('pending');
    expect(state.ledger).toEqual([]);
    expect(state.receipts).toEqual([]);
  });

  it('a forged refusal of a payout that succeeded is reviewed and refunds nothing', async () => {
    await p.registerPayout('E2E-FORGE-REFUND', '900.00');
    const order = p.sim.createPayout({ merchantOrderNo: 'E2E-FORGE-REFUND', currency: 'INR', amount: '900.00' });
    const [genuine] = p.sim.finalize(order.orderNo, 4).deliveries;
    await p.sim.settled(genuine!);
    await waitFor(async () => (await p.orderState('E2E-FORGE-REFUND')).status === 'succeeded', {
      message: 'payout not succeeded',
    });

    // A "refused" record would refund the 900.00 if it were believed.
    await p.sim.settled(p.sim.forge({ what: 'state', ref: order.orderNo }));
    await waitFor(async () => (await p.orderState('E2E-FORGE-REFUND')).reviews.length > 0, { message: 'no review' });
    const state = await p.orderState('E2E-FORGE-REFUND');
    expect(state.reviews).toEqual([{ reasonCode: 'VERIFY_STATE_MISMATCH', state: 5, status: 'open' }]);
    expect(state.status).toBe('succeeded');
    expect(state.ledger).toEqual([]);
    expect(state.receipts).toEqual([{ orderNo: order.orderNo, state: 4 }]);
  });

  it('a forged pay-in for an order we never registered is reviewed once its grace period is over', async () => {
    const forged = p.sim.forge({ what: 'unknown-order', type: 'payin' });
    await p.sim.settled(forged);
    const rows = await waitFor(
      async () => {
        const r = await env.db.pool.query<{ reason_code: string; status: string }>(
          'select reason_code, status from reviews where merchant_order_no = $1',
          [forged.merchantOrderNo],
        );
        return r.rows.length > 0 ? r.rows : undefined;
      },
      { message: 'no review for the unknown order' },
    );
    expect(rows).toEqual([{ reason_code: 'VERIFY_ORDER_UNKNOWN', status: 'open' }]);
    const { rows: touched } = await env.db.pool.query('select 1 from orders where merchant_order_no = $1', [
      forged.merchantOrderNo,
    ]);
    expect(touched).toEqual([]);
  });
});
