import { createDb, type Db } from '@mcb/core/db';
import { callbackJobSchema } from '@mcb/core/queue';
import { commitEvents, findOrder, type CommitInput } from '@mcb/settlement';
import { createOrder, MERCHANT_NO, payinEvent, uid, useTestEnv, waitFor } from '@mcb/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const env = useTestEnv();
let a: Db;
let b: Db;

beforeAll(() => {
  // Two processes' pools: each batch commits on its own connection, as two workers would.
  a = createDb(env.databaseUrl, { max: 2, applicationName: 'batch-a' });
  b = createDb(env.databaseUrl, { max: 2, applicationName: 'batch-b' });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
});

/** A pay-in's event of `state` (3 success, 6 released: two pairs of one order, both crediting it). */
async function payins(n: number): Promise<((state: 3 | 6) => CommitInput)[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const no = `PI-${uid()}`;
      await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '3' });
      const order = (await findOrder(env.db.db, { merchantNo: MERCHANT_NO, merchantOrderNo: no }))!;
      return (state: 3 | 6): CommitInput => ({
        event: callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '3', state })),
        order,
        confirmed: {
          orderNo: `P${no}`,
          merchantNo: MERCHANT_NO,
          merchantOrderNo: no,
          type: 'payin',
          state,
          amount: '3',
          currency: 'PHP',
        },
        target: 'credited',
      });
    }),
  );
}

const errorCodes = (results: Awaited<ReturnType<typeof commitEvents>>) =>
  results.flatMap((r) => (r.ok ? [] : [String((r.error as { code?: string }).code ?? (r.error as Error).message)]));

describe('two batches of the same orders in reverse order', () => {
  it.each([1, 2, 3, 4])(
    'never deadlock when both start at the same instant, each from its own end of the list (round %i)',
    async () => {
      const orders = await payins(32);
      const ids = orders.map((o) => o(3).order.id);
      // 1. Another session holds the first and the last order, so both batches are stopped at their first row lock.
      const holder = new pg.Client({ connectionString: env.databaseUrl });
      await holder.connect();
      let running: Promise<[Awaited<ReturnType<typeof commitEvents>>, Awaited<ReturnType<typeof commitEvents>>]>;
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM orders WHERE id = ANY($1) FOR NO KEY UPDATE', [[ids[0], ids.at(-1)]]);
        running = Promise.all([
          commitEvents(
            a.db,
            orders.map((o) => o(3)),
          ),
          commitEvents(b.db, orders.map((o) => o(6)).reverse()),
        ]);
        await waitFor(
          async () => {
            // Asked outside the holder's transaction: pg_stat_activity is read once per transaction.
            const { rows } = await env.db.pool.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND application_name IN ('batch-a', 'batch-b') AND wait_event_type = 'Lock'`,
            );
            return rows[0]!.n === 2 ? true : undefined;
          },
          { timeoutMs: 10_000, message: 'both batches waiting on a held order' },
        );
      } finally {
        // 2. Released together: a batch that locks rows in its own input order now holds one end and wants the other.
        await holder.query('COMMIT').catch(() => {});
        await holder.end();
      }
      const [first, second] = await running;
      expect([...errorCodes(first), ...errorCodes(second)]).toEqual([]);
      const { rows } = await env.db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM ledger_entries WHERE order_id = ANY($1)',
        [ids],
      );
      expect(rows[0]!.n).toBe(orders.length);
    },
  );

  it('never deadlock (no 40P01) over many concurrent rounds, and credit each order once', async () => {
    const codes: string[] = [];
    const ROUNDS = 12;
    for (let round = 0; round < ROUNDS; round++) {
      const orders = await payins(24);
      // State 3 in one batch, state 6 in the other: different pairs (no receipt conflict), the same order rows,
      // reached in opposite orders.
      const [first, second] = await Promise.all([
        commitEvents(
          a.db,
          orders.map((o) => o(3)),
        ),
        commitEvents(b.db, orders.map((o) => o(6)).reverse()),
      ]);
      codes.push(...errorCodes(first), ...errorCodes(second));
      const { rows } = await env.db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM ledger_entries WHERE order_id = ANY($1)',
        [orders.map((o) => o(3).order.id)],
      );
      expect(rows[0]!.n).toBe(orders.length);
    }
    expect(codes).toEqual([]);
  });
});
