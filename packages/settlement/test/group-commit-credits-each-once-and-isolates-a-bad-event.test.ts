import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import { commitEvents, findOrder, type CommitInput, type CommitResult, type Settled } from '@mcb/settlement';
import { createOrder, MERCHANT_NO, payinEvent, payoutEvent, uid, useTestEnv, waitFor } from '@mcb/testkit';
import pg from 'pg';
import { describe, expect, it } from 'vitest';

const env = useTestEnv();

async function payin(amount = '10'): Promise<CommitInput> {
  const no = `PI-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount });
  const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
  const event: CallbackJob = callbackJobSchema.parse(
    payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: amount }),
  );
  const confirmed = {
    orderNo: `P${no}`,
    merchantNo: MERCHANT_NO,
    merchantOrderNo: no,
    type: 'payin' as const,
    state: 6,
    amount,
    currency: 'PHP',
  };
  return { event, order, confirmed, target: 'credited' };
}

/** What Postgres holds for the inputs' pairs: receipts (with the transaction that wrote each), ledger rows, orders. */
async function stored(inputs: readonly CommitInput[]) {
  const orderNos = inputs.map((x) => x.event.orderNo);
  const ids = inputs.map((x) => x.order.id);
  const { rows: receipts } = await env.db.pool.query<{ order_no: string; xmin: string }>(
    'SELECT order_no, xmin::text FROM callback_receipts WHERE order_no = ANY($1)',
    [orderNos],
  );
  const { rows: ledger } = await env.db.pool.query<{ order_id: string }>(
    'SELECT order_id FROM ledger_entries WHERE order_id = ANY($1)',
    [ids],
  );
  const { rows: events } = await env.db.pool.query<{ order_id: string }>(
    'SELECT order_id FROM order_events WHERE order_id = ANY($1)',
    [ids],
  );
  const { rows: orders } = await env.db.pool.query<{ status: string }>('SELECT status FROM orders WHERE id = ANY($1)', [
    ids,
  ]);
  return { receipts, ledger, events, orders, transactions: new Set(receipts.map((r) => r.xmin)).size };
}

const values = (results: Settled<CommitResult>[]) =>
  results.map((r) => {
    if (!r.ok) throw r.error;
    return r.value;
  });

describe('group commit', () => {
  it('credits N events of N orders once each, in one transaction', async () => {
    const inputs = await Promise.all(Array.from({ length: 25 }, () => payin()));
    const results = values(await commitEvents(env.db.db, inputs));
    expect(results.map((r) => r.status)).toEqual(inputs.map(() => 'applied'));
    const s = await stored(inputs);
    expect(s.receipts).toHaveLength(25);
    expect(s.ledger).toHaveLength(25);
    expect(s.events).toHaveLength(25);
    expect(s.orders.every((o) => o.status === 'credited')).toBe(true);
    expect(s.transactions).toBe(1);
    // Each job is told its own outcome: the receipt and outbox ids it got are its own.
    expect(new Set(results.map((r) => (r.status === 'applied' ? r.receiptId : 0))).size).toBe(25);

    // The same batch again is all duplicates and writes nothing.
    const again = values(await commitEvents(env.db.db, inputs));
    expect(again).toEqual(inputs.map(() => ({ status: 'duplicate', reason: 'receipt-exists' })));
    expect((await stored(inputs)).ledger).toHaveLength(25);
  });

  it('credits a pair held twice in one batch once', async () => {
    const a = await payin();
    const b = await payin();
    const results = values(await commitEvents(env.db.db, [a, b, { ...a, jobId: 'second-copy' }]));
    expect(results[0]).toMatchObject({ status: 'applied' });
    expect(results[1]).toMatchObject({ status: 'applied' });
    expect(results[2]).toEqual({ status: 'duplicate', reason: 'receipt-exists' });
    const s = await stored([a, b]);
    expect(s.receipts).toHaveLength(2);
    expect(s.ledger).toHaveLength(2);
  });

  it('tells a conflicting final state from a duplicate, per event, and keeps no receipt for either', async () => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '5' });
    const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
    const confirmed = (state: number) => ({
      orderNo: `P${no}`,
      merchantNo: MERCHANT_NO,
      merchantOrderNo: no,
      type: 'payout' as const,
      state,
      amount: '5',
      currency: 'PHP',
    });
    const ev = (state: number) =>
      callbackJobSchema.parse(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state }));
    const other = await payin();
    // 4 (succeeded) and 5 (refused) of the same order in one batch: the first moves it, the second conflicts.
    const results = values(
      await commitEvents(env.db.db, [
        { event: ev(4), order, confirmed: confirmed(4), target: 'succeeded' },
        other,
        { event: ev(5), order, confirmed: confirmed(5), target: 'refused' },
      ]),
    );
    expect(results[0]).toMatchObject({ status: 'applied', outcome: 'succeeded' });
    expect(results[1]).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(results[2]).toEqual({ status: 'conflict', currentStatus: 'succeeded', currentPlatformOrderNo: `P${no}` });
    const { rows } = await env.db.pool.query('SELECT state FROM callback_receipts WHERE order_no = $1', [`P${no}`]);
    expect(rows).toEqual([{ state: 4 }]);
  });

  it('commits the others when one event violates a constraint, and fails that one alone', async () => {
    const good = await Promise.all(Array.from({ length: 6 }, () => payin()));
    const poisoned = await payin();
    // A pay-in order cannot become "succeeded" (orders_kind_status): the statement fails for the whole batch.
    const bad: CommitInput = { ...poisoned, target: 'succeeded' };
    const batch = [...good.slice(0, 3), bad, ...good.slice(3)];
    const results = await commitEvents(env.db.db, batch);
    expect(results.filter((r) => r.ok && r.value.status === 'applied')).toHaveLength(6);
    const failed = results[3]!;
    expect(failed.ok).toBe(false);
    expect(!failed.ok && (failed.error as { code?: string }).code).toBe('23514');
    const s = await stored(good);
    expect(s.ledger).toHaveLength(6);
    // Split: each of the six committed in its own transaction after the batch failed.
    expect(s.transactions).toBe(6);
    const p = await stored([poisoned]);
    expect(p.receipts).toHaveLength(0);
    expect(p.orders).toEqual([{ status: 'pending' }]);
  });

  it('loses nothing and doubles nothing when its connection dies mid-batch; the whole batch fails transiently and a retry credits once', async () => {
    const inputs = await Promise.all(Array.from({ length: 8 }, () => payin()));
    // Hold one order's row so the batch stops inside its transaction, where it locks its orders (before it writes).
    const blocker = new pg.Client({ connectionString: env.databaseUrl });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM orders WHERE id = $1 FOR UPDATE', [inputs[5]!.order.id]);
      const running = commitEvents(env.db.db, inputs);
      const { rows } = await waitFor(
        async () => {
          const r = await blocker.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
          );
          return r.rows.length > 0 ? r : undefined;
        },
        { timeoutMs: 10_000, message: 'the batch waiting on the held row' },
      );
      await blocker.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      const results = await running;
      expect(results.every((r) => !r.ok)).toBe(true);
      expect((await stored(inputs)).receipts).toHaveLength(0);
    } finally {
      await blocker.query('ROLLBACK').catch(() => {});
      await blocker.end();
    }
    const retried = values(await commitEvents(env.db.db, inputs));
    expect(retried.every((r) => r.status === 'applied')).toBe(true);
    const s = await stored(inputs);
    expect(s.ledger).toHaveLength(8);
    expect(s.transactions).toBe(1);
  });
});
