import type { Order } from '@mcb/core/db';
import { callbackJobSchema } from '@mcb/core/queue';
import { commitEvent, findOrder, type CommitInput } from '@mcb/settlement';
import { createOrder, MERCHANT_NO, payinEvent, uid, useTestEnv } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';

// The commit's guarded transition on its own: each event below carries a snapshot of our order taken while it was
// still pending (as a worker or a sweep holds it between its look-up and its commit), so only the SQL guard stands
// between a second final event and a second credit. The look-up's "already final" short cut is not in the way.
const env = useTestEnv();

async function pendingPayin(amount = '10'): Promise<{ no: string; order: Order }> {
  const no = `PI-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount });
  return { no, order: (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))! };
}

function payin(order: Order, platformOrderNo: string, state: number): CommitInput {
  const event = callbackJobSchema.parse(
    payinEvent({ orderNo: platformOrderNo, merchantOrderNo: order.merchantOrderNo, fiatAmount: order.amount, state }),
  );
  const confirmed = {
    orderNo: platformOrderNo,
    merchantNo: MERCHANT_NO,
    merchantOrderNo: order.merchantOrderNo,
    type: 'payin' as const,
    state,
    amount: order.amount,
    currency: 'PHP',
  };
  return { event, order, confirmed, target: 'credited' };
}

async function stored(orderId: number) {
  const q = (sql: string) => env.db.pool.query(sql, [orderId]).then((r) => r.rows);
  return {
    order: (await q('SELECT status, platform_order_no FROM orders WHERE id = $1'))[0],
    ledger: await q('SELECT entry_type, amount::text FROM ledger_entries WHERE order_id = $1'),
    receipts: await q('SELECT order_no, state FROM callback_receipts WHERE order_id = $1 ORDER BY id'),
    events: await q('SELECT event_type FROM order_events WHERE order_id = $1'),
  };
}

describe('the guarded transition: an order moves out of pending once', () => {
  it('does not credit a pay-in credited through state 3 again for its state 6 (credited → credited refused)', async () => {
    const { order } = await pendingPayin('12.34');
    expect(await commitEvent(env.db.db, payin(order, `P-${order.merchantOrderNo}`, 3))).toMatchObject({
      status: 'applied',
      outcome: 'credited',
    });
    // Another pair (OrderNo, 6): the receipt's unique key does not stop it; the guard must.
    expect(await commitEvent(env.db.db, payin(order, `P-${order.merchantOrderNo}`, 6))).toEqual({
      status: 'duplicate',
      reason: 'already-final',
    });
    const s = await stored(order.id);
    expect(s.order).toEqual({ status: 'credited', platform_order_no: `P-${order.merchantOrderNo}` });
    expect(s.ledger).toEqual([{ entry_type: 'payin_credit', amount: '12.34' }]);
    expect(s.receipts).toEqual([{ order_no: `P-${order.merchantOrderNo}`, state: 3 }]); // the 6's receipt taken back
    expect(s.events).toEqual([{ event_type: 'payin.credited' }]);
  });

  it('credits once when the 3 and the 6 of one pay-in commit at the same time, in two transactions', async () => {
    for (let i = 0; i < 10; i++) {
      const { order } = await pendingPayin();
      const results = await Promise.all(
        [3, 6].map((state) => commitEvent(env.db.db, payin(order, `P-${order.merchantOrderNo}`, state))),
      );
      expect(results.map((r) => r.status).sort()).toEqual(['applied', 'duplicate']);
      const s = await stored(order.id);
      expect(s.ledger).toHaveLength(1);
      expect(s.receipts).toHaveLength(1);
    }
  });

  it('refuses to move our order, credited for one platform order, for another platform order', async () => {
    const { order } = await pendingPayin();
    await commitEvent(env.db.db, payin(order, `P1-${order.merchantOrderNo}`, 6));
    expect(await commitEvent(env.db.db, payin(order, `P2-${order.merchantOrderNo}`, 6))).toEqual({
      status: 'conflict',
      currentStatus: 'credited',
      currentPlatformOrderNo: `P1-${order.merchantOrderNo}`,
    });
    const s = await stored(order.id);
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toEqual([{ order_no: `P1-${order.merchantOrderNo}`, state: 6 }]);
  });
});
