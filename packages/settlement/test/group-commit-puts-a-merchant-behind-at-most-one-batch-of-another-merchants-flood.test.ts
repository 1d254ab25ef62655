import { orders, type Order } from '@mcb/core/db';
import { callbackJobSchema } from '@mcb/core/queue';
import { createSettlementBatchers, type CommitInput, type CommitResult } from '@mcb/settlement';
import { payinEvent, uid, useTestEnv } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';

// The group commit is shared by every merchant of a worker process. Filled first in, first out, a merchant's flood of
// 5,000 verified events would keep another merchant's one event out of ~79 transactions; filled round-robin across
// merchants, that event goes in the very next one.

const env = useTestEnv();
const A = 'M-FLOOD';
const B = 'M-QUIET';
const FLOOD = 5000;

/** Pending pay-ins of `merchantNo`, written in one statement, read back as the money path reads them. */
async function pendingOrders(merchantNo: string, prefix: string, count: number): Promise<Order[]> {
  await env.db.pool.query(
    `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, request_hash)
     select $1, $2 || i, 'payin', 'PHP', '10', 'h' from generate_series(1, $3::int) i`,
    [merchantNo, prefix, count],
  );
  return env.db.db.select().from(orders).where(eq(orders.merchantNo, merchantNo)).orderBy(orders.id);
}

function input(order: Order): CommitInput {
  const orderNo = `P${order.merchantOrderNo}`;
  const event = callbackJobSchema.parse({
    ...payinEvent({ orderNo, merchantOrderNo: order.merchantOrderNo, fiatAmount: order.amount }),
    merchantNo: order.merchantNo,
  });
  const confirmed = {
    orderNo,
    merchantNo: order.merchantNo,
    merchantOrderNo: order.merchantOrderNo,
    type: 'payin' as const,
    state: 6,
    amount: order.amount,
    currency: 'PHP',
  };
  return { event, order, confirmed, target: 'credited', jobId: `payin-${orderNo}-6` };
}

describe('the group commit under one merchant’s flood', () => {
  it(`commits another merchant's event in the next transaction after the one in flight, not behind ${FLOOD} events`, async () => {
    const run = uid();
    const flood = (await pendingOrders(A, `A-${run}-`, FLOOD)).map(input);
    const [quiet] = (await pendingOrders(B, `B-${run}-`, 1)).map(input);
    const batches: number[] = [];
    const batchers = createSettlementBatchers(env.db.db, {
      onBatch: (kind, n) => kind === 'commit' && batches.push(n),
    });

    // 1. A's flood: its first transaction starts at once, the rest wait in A's queue.
    let floodDone = 0;
    const floodResults = flood.map((x) => batchers.commits.submit(x).then((r) => (floodDone++, r)));
    expect(batches).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(batches).toHaveLength(1);
    expect(batchers.commits.waiting).toBe(FLOOD - batches[0]!);

    // 2. B's one event arrives behind the 5,000 - 64 of A still waiting.
    let seen: { batchesStarted: number; floodCommitted: number } | undefined;
    const quietResult: Promise<CommitResult> = batchers.commits.submit(quiet!).then((r) => {
      seen = { batchesStarted: batches.length, floodCommitted: floodDone };
      return r;
    });

    // 3. It is committed by the second transaction: the first (in flight when it came) and its own.
    expect(await quietResult).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(seen!.batchesStarted).toBe(2);
    expect(seen!.floodCommitted).toBeLessThanOrEqual(2 * 64);

    // 4. A's flood is not held back for it: every event credited once, at its own amount, A's in ~79 transactions.
    const results = await Promise.all(floodResults);
    expect(results.filter((r) => r.status === 'applied')).toHaveLength(FLOOD);
    expect(batches.length).toBeGreaterThanOrEqual(Math.ceil((FLOOD + 1) / 64));
    const { rows } = await env.db.pool.query<{ merchant_no: string; n: number; total: string }>(
      `select merchant_no, count(*)::int as n, sum(amount)::text as total from ledger_entries
        where merchant_no = any($1) group by merchant_no order by merchant_no`,
      [[A, B]],
    );
    expect(rows).toEqual([
      { merchant_no: A, n: FLOOD, total: String(FLOOD * 10) },
      { merchant_no: B, n: 1, total: '10' },
    ]);
  });
});
