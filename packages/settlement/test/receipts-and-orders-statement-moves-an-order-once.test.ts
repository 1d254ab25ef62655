import { callbackJobSchema } from '@mcb/core/queue';
import { commitEvents, findOrder, type CommitInput } from '@mcb/settlement';
import { createOrder, MERCHANT_NO, payinEvent, payoutEvent, uid, useTestEnv } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';
import { RECEIPTS_AND_ORDERS_SQL, receiptsAndOrdersParams, type ReceiptsAndOrdersRow } from '../src/commit-sql.ts';

const env = useTestEnv();

// The statement on its own, without the JavaScript split that gives each round distinct orders and pairs: it must
// still move an order at most once and give a pair one receipt. Run in a transaction that is rolled back.
async function runStatement(inputs: readonly CommitInput[]) {
  const client = await env.db.pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<ReceiptsAndOrdersRow>(RECEIPTS_AND_ORDERS_SQL, receiptsAndOrdersParams(inputs));
    const { rows: orders } = await client.query<{ id: string; status: string; platform_order_no: string | null }>(
      'SELECT id, status, platform_order_no FROM orders WHERE id = ANY($1)',
      [inputs.map((x) => x.order.id)],
    );
    const { rows: receipts } = await client.query<{ id: string; state: number }>(
      'SELECT id, state FROM callback_receipts WHERE order_no = ANY($1) ORDER BY state',
      [inputs.map((x) => x.event.orderNo)],
    );
    return { rows, orders, receipts };
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

async function payout() {
  const no = `PO-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '5' });
  const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
  return (state: 4 | 5): CommitInput => ({
    event: callbackJobSchema.parse(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state })),
    order,
    confirmed: {
      orderNo: `P${no}`,
      merchantNo: MERCHANT_NO,
      merchantOrderNo: no,
      type: 'payout',
      state,
      amount: '5',
      currency: 'PHP',
    },
    target: state === 4 ? 'succeeded' : 'refused',
  });
}

async function payin() {
  const no = `PI-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '10' });
  const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
  return (state: 3 | 6, jobId?: string): CommitInput => ({
    event: callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10', state })),
    order,
    confirmed: {
      orderNo: `P${no}`,
      merchantNo: MERCHANT_NO,
      merchantOrderNo: no,
      type: 'payin',
      state,
      amount: '10',
      currency: 'PHP',
    },
    target: 'credited',
    jobId,
  });
}

describe('the receipts-and-orders statement, given one order twice', () => {
  it('moves a payout once when its 4 and 5 come in one statement: the first moves it, the second does not', async () => {
    const ev = await payout();
    const { rows, orders } = await runStatement([ev(4), ev(5)]);
    expect(rows.map((r) => r.moved)).toEqual([true, false]);
    expect(orders).toEqual([expect.objectContaining({ status: 'succeeded' })]);
  });

  it('moves a payout once in the other order too (5 first: refused, and 4 is not moved)', async () => {
    const ev = await payout();
    const { rows, orders } = await runStatement([ev(5), ev(4)]);
    expect(rows.map((r) => r.moved)).toEqual([true, false]);
    expect(orders).toEqual([expect.objectContaining({ status: 'refused' })]);
  });

  it('moves a pay-in once when its 3 and 6 come in one statement', async () => {
    const ev = await payin();
    const { rows, orders } = await runStatement([ev(3), ev(6)]);
    expect(rows.filter((r) => r.moved)).toHaveLength(1);
    expect(orders).toEqual([expect.objectContaining({ status: 'credited' })]);
  });

  it('gives a pair held twice one receipt, owned by its first event; the second is told it has none', async () => {
    const ev = await payin();
    const { rows, receipts } = await runStatement([ev(6, 'a'), ev(6, 'b')]);
    expect(receipts).toHaveLength(1);
    expect(rows[0]).toMatchObject({ receipt_id: receipts[0]!.id, moved: true });
    expect(rows[1]).toMatchObject({ receipt_id: null, moved: false });
  });

  it('moves an order only from an event that holds a new receipt, even when an earlier one of the order has none', async () => {
    const ev = await payin();
    // 3 is applied before; 3 again and 6 in one statement: 6 moves nothing (the order is credited already)...
    expect((await commitEvents(env.db.db, [ev(3)]))[0]).toMatchObject({ ok: true, value: { status: 'applied' } });
    const { rows } = await runStatement([ev(3), ev(6)]);
    expect(rows[0]).toMatchObject({ receipt_id: null, moved: false });
    expect(rows[1]).toMatchObject({ moved: false });
  });
});

describe('the group commit, given one order twice in one call', () => {
  it('finalises a payout once: no refund is posted for a payout that succeeded', async () => {
    const ev = await payout();
    const results = await commitEvents(env.db.db, [ev(4), ev(5), ev(5)]);
    expect(results.map((r) => r.ok && r.value.status)).toEqual(['applied', 'conflict', 'conflict']);
    const { rows: ledger } = await env.db.pool.query('SELECT entry_type FROM ledger_entries WHERE order_id = $1', [
      ev(4).order.id,
    ]);
    expect(ledger).toEqual([]);
    const { rows: receipts } = await env.db.pool.query('SELECT state FROM callback_receipts WHERE order_no = $1', [
      ev(4).event.orderNo,
    ]);
    expect(receipts).toEqual([{ state: 4 }]);
  });
});
