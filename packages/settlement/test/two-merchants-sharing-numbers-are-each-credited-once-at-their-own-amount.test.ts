import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import { applyEvent, createSettlementBatchers, findOrder, type ApplyDeps } from '@mcb/settlement';
import { createOrder, payinEvent, startFakePlatform, uid, useTestEnv, type FakePlatform } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Two merchant numbers in one database: each its own platform (Get order answers for its merchant only), its own
// orders, and the same shared batchers. Numbers may collide across them: a merchant order number both chose, an
// OrderNo the platform reused. Each order is credited once, at its own amount, and never on the other's callback.

const env = useTestEnv();
const A = 'M-ALPHA';
const B = 'M-BETA';
const logger = createLogger({ name: 'two-merchants', level: 'silent' });
const platforms: Record<string, FakePlatform> = {};
const clients: PlatformClient[] = [];
const deps: Record<string, ApplyDeps> = {};

beforeAll(async () => {
  const batchers = createSettlementBatchers(env.db.db);
  for (const merchantNo of [A, B]) {
    const platform = await startFakePlatform();
    const client = createPlatformClient({ baseUrl: platform.url, merchantNo, timeoutMs: 2000 });
    platforms[merchantNo] = platform;
    clients.push(client);
    deps[merchantNo] = { db: env.db.db, platform: client, logger, batchers };
  }
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(Object.values(platforms).map((p) => p.close()));
});

/** `merchantNo`'s pay-in `merchantOrderNo` of `amount`, which its platform confirms released under `orderNo`. */
async function paidOrder(merchantNo: string, merchantOrderNo: string, orderNo: string, amount: string) {
  await createOrder(env.db.db, { merchantNo, merchantOrderNo, kind: 'payin', amount });
  platforms[merchantNo]!.setOrder({
    orderNo,
    merchantNo,
    merchantOrderNo,
    type: 'payin',
    state: 6,
    amountJson: amount,
    currency: 'PHP',
  });
  return callbackJobSchema.parse({ ...payinEvent({ orderNo, merchantOrderNo, fiatAmount: amount }), merchantNo });
}

const apply = (event: CallbackJob, options = {}) => applyEvent(event, deps[event.merchantNo]!, options);

/** Ledger entries, receipts and the order of each merchant for one merchant order number. */
async function ledgerOf(merchantOrderNo: string) {
  const { rows } = await env.db.pool.query<{ merchant_no: string; amount: string; status: string; receipts: number }>(
    `select o.merchant_no, l.amount::text, o.status,
            (select count(*)::int from callback_receipts r where r.order_id = o.id) as receipts
       from orders o left join ledger_entries l on l.order_id = o.id
      where o.merchant_order_no = $1 order by o.merchant_no`,
    [merchantOrderNo],
  );
  return rows;
}

describe('two merchants in one ledger', () => {
  it('credits the same merchant order number of each merchant once, at its own amount', async () => {
    const no = `SAME-${uid()}`;
    const a = await paidOrder(A, no, `PA-${no}`, '100.00');
    const b = await paidOrder(B, no, `PB-${no}`, '250.00');
    // Both at once, twice each: the shared batchers put them in the same look-up and commit batches.
    const outcomes = await Promise.all([a, b, a, b].map((e) => apply(e)));
    expect(outcomes.map((o) => o.status).sort()).toEqual(['applied', 'applied', 'duplicate', 'duplicate']);
    expect(await ledgerOf(no)).toEqual([
      { merchant_no: A, amount: '100.00', status: 'credited', receipts: 1 },
      { merchant_no: B, amount: '250.00', status: 'credited', receipts: 1 },
    ]);
    expect(await apply(b)).toMatchObject({ status: 'duplicate' });
    expect((await findOrder(env.db.db, { merchantNo: B, merchantOrderNo: no }))?.amount).toBe('250.00');
  });

  it('credits each merchant once when the platform reuses one OrderNo for both', async () => {
    const run = uid();
    const orderNo = `P-REUSED-${run}`;
    const a = await paidOrder(A, `A-${run}`, orderNo, '70.00');
    const b = await paidOrder(B, `B-${run}`, orderNo, '80.00');
    expect(await apply(a)).toMatchObject({ status: 'applied', outcome: 'credited' });
    // The pair (OrderNo, 6) is applied for A; for B it is not, and B's own receipt is the guard for B.
    expect(await apply(b)).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(await apply(b)).toMatchObject({ status: 'duplicate', reason: 'receipt-exists' });
    expect(await apply(a)).toMatchObject({ status: 'duplicate', reason: 'receipt-exists' });
    const { rows } = await env.db.pool.query(
      `select merchant_no, merchant_order_no from callback_receipts where order_no = $1 order by merchant_no`,
      [orderNo],
    );
    expect(rows).toEqual([
      { merchant_no: A, merchant_order_no: `A-${run}` },
      { merchant_no: B, merchant_order_no: `B-${run}` },
    ]);
    expect(await ledgerOf(`A-${run}`)).toEqual([{ merchant_no: A, amount: '70.00', status: 'credited', receipts: 1 }]);
    expect(await ledgerOf(`B-${run}`)).toEqual([{ merchant_no: B, amount: '80.00', status: 'credited', receipts: 1 }]);
  });

  it("never touches A's order on B's callback naming it: B's order is unknown, it waits, then goes to review in B's name", async () => {
    const no = `A-ONLY-${uid()}`;
    const genuine = await paidOrder(A, no, `PA-${no}`, '100.00');
    const crossed: CallbackJob = { ...genuine, merchantNo: B };
    expect(await apply(crossed)).toMatchObject({ status: 'deferred', code: 'VERIFY_ORDER_UNKNOWN' });
    expect(await apply(crossed, { noWait: true })).toMatchObject({ status: 'review', code: 'VERIFY_ORDER_UNKNOWN' });
    const { rows: opened } = await env.db.pool.query(
      'select merchant_no, status from reviews where merchant_order_no = $1',
      [no],
    );
    expect(opened).toEqual([{ merchant_no: B, status: 'open' }]);
    // A's order is as it was, and neither platform was asked: an order of B's by that number does not exist.
    expect(await ledgerOf(no)).toEqual([{ merchant_no: A, amount: null, status: 'pending', receipts: 0 }]);
    expect(platforms[A]!.hits.get(no) ?? 0).toBe(0);
    expect(platforms[B]!.hits.get(no) ?? 0).toBe(0);
    // A's own callback still credits A, once; B's review is left for a person.
    expect(await apply(genuine)).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(await ledgerOf(no)).toEqual([{ merchant_no: A, amount: '100.00', status: 'credited', receipts: 1 }]);
  });

  it('refuses by its foreign keys a receipt, a ledger entry or a note that names another merchant than its order', async () => {
    const run = uid();
    const a = await paidOrder(A, `FK-A-${run}`, `PFA-${run}`, '10.00');
    const b = await paidOrder(B, `FK-B-${run}`, `PFB-${run}`, '20.00');
    await apply(a);
    await apply(b);
    const ids = await env.db.pool.query<{ merchant_no: string; order_id: string; receipt_id: string }>(
      `select o.merchant_no, o.id as order_id, r.id as receipt_id from orders o join callback_receipts r on r.order_id = o.id
        where o.merchant_order_no = any($1) order by o.merchant_no`,
      [[`FK-A-${run}`, `FK-B-${run}`]],
    );
    const [ra, rb] = ids.rows;
    const refused = (sql: string, params: unknown[], constraint: string) =>
      expect(env.db.pool.query(sql, params)).rejects.toMatchObject({ code: '23503', constraint });

    // A receipt in B's name for A's order.
    await refused(
      `insert into callback_receipts (order_no, state, kind, merchant_no, merchant_order_no, order_id, confirmed_amount,
                                      source, outcome)
       values ('PX', 6, 'payin', $1, $2, $3, '10.00', 'callback', 'credited')`,
      [B, `FK-A-${run}`, ra!.order_id],
      'callback_receipts_order_merchant_fk',
    );
    // A ledger entry in B's name on A's order and receipt; one in A's name on A's order with B's receipt.
    const ledger = `insert into ledger_entries (merchant_no, order_id, entry_type, amount, currency, receipt_id)
                    values ($1, $2, 'payout_refund', '10.00', 'PHP', $3)`;
    await refused(ledger, [B, ra!.order_id, ra!.receipt_id], 'ledger_entries_order_merchant_fk');
    await refused(ledger, [A, ra!.order_id, rb!.receipt_id], 'ledger_entries_receipt_merchant_fk');
    // An outbox event and a note in the other merchant's name.
    await refused(
      `insert into order_events (merchant_no, order_id, merchant_order_no, event_type, payload)
       values ($1, $2, 'x', 'payin.credited', '{}')`,
      [A, rb!.order_id],
      'order_events_order_merchant_fk',
    );
    await refused(
      `insert into order_notes (merchant_no, merchant_order_no, order_no, state, receipt_id, job_id, topic, detail)
       values ($1, 'x', 'x', 6, $2, 'j', 'unconfirmed-field-differs', 'x')`,
      [B, ra!.receipt_id],
      'order_notes_receipt_merchant_fk',
    );
    expect(await ledgerOf(`FK-A-${run}`)).toEqual([
      { merchant_no: A, amount: '10.00', status: 'credited', receipts: 1 },
    ]);
  });
});
