/**
 * Limit: Postgres transactions per second for the credit's own statements (apps/worker commit-event.ts) written as
 * plain SQL with node-postgres: receipt insert ON CONFLICT DO NOTHING RETURNING, guarded order update, ledger insert,
 * outbox insert, review resolve, in one transaction, at the worker's concurrency, on pre-inserted pending orders.
 * No verification reads and no Get order: this is the ceiling a credit pipeline on this Postgres can approach.
 */
import { PayinState } from '@mcb/core/spec';
import pg from 'pg';
import { insertPendingPayins, truncateAll } from '../lib/database.ts';

export interface PostgresLimit {
  transactionsPerSecond: number;
  concurrency: number;
  transactions: number;
  seconds: number;
}

const RECEIPT = `insert into callback_receipts (order_no, state, kind, merchant_no, merchant_order_no, order_id, pay_time,
  quantity, fiat_amount, confirmed_amount, source, outcome, job_id, received_at)
  values ($1, 6, 'payin', $2, $3, $4, $5, $6, $7, $8, 'callback', 'credited', $9, $10)
  on conflict (order_no, state, merchant_no) do nothing returning id`;
const MOVE = `update orders set status = 'credited', platform_order_no = $1, updated_at = now(), finalized_at = now()
  where id = $2 and status = 'pending' and (platform_order_no is null or platform_order_no = $1) returning id`;
const LEDGER = `insert into ledger_entries (order_id, entry_type, amount, currency, receipt_id)
  values ($1, 'payin_credit', $2, 'INR', $3) returning id`;
const OUTBOX = `insert into order_events (order_id, merchant_order_no, event_type, payload)
  values ($1, $2, 'payin.credited', $3) returning id`;
const RESOLVE = `update reviews set status = 'resolved', closed_at = now(), updated_at = now(),
  note = coalesce(note, 'applied after re-verification') where order_no = $1 and state = 6 and status = 'open'`;

async function credit(client: pg.PoolClient, id: number): Promise<void> {
  const merchantOrderNo = `LIM-${id}`;
  const orderNo = `PLIM${id}`;
  const now = new Date();
  await client.query('begin');
  try {
    const receipt = await client.query<{ id: string }>(RECEIPT, [
      orderNo,
      'M-BENCH-1',
      merchantOrderNo,
      id,
      now,
      '12.345678',
      '1000.10',
      '1000.10',
      `payin-${orderNo}-6`,
      now,
    ]);
    const receiptId = receipt.rows[0]?.id;
    if (!receiptId) throw new Error('receipt not inserted');
    const moved = await client.query(MOVE, [orderNo, id]);
    if (moved.rowCount !== 1) throw new Error('order not moved');
    await client.query(LEDGER, [id, '1000.10', receiptId]);
    await client.query(OUTBOX, [
      id,
      merchantOrderNo,
      JSON.stringify({
        merchantOrderNo,
        kind: 'payin',
        status: 'credited',
        amount: '1000.10',
        currency: 'INR',
        platformOrderNo: orderNo,
        state: PayinState.Released,
        confirmedState: PayinState.Released,
        source: 'callback',
      }),
    ]);
    await client.query(RESOLVE, [orderNo]);
    await client.query('commit');
  } catch (e) {
    await client.query('rollback').catch(() => {});
    throw e;
  }
}

export async function measurePostgres(opts: {
  databaseUrl: string;
  seconds: number;
  concurrency: number;
  maxTransactions: number;
}): Promise<PostgresLimit> {
  const pool = new pg.Pool({
    connectionString: opts.databaseUrl,
    max: opts.concurrency,
    application_name: 'mcb-bench-limit',
  });
  try {
    await truncateAll(pool);
    await insertPendingPayins(pool, 'LIM-', opts.maxTransactions, '1000.10');
    await pool.query('vacuum analyze orders');
    let next = 0;
    let done = 0;
    const t0 = performance.now();
    const stopAt = t0 + opts.seconds * 1000;
    await Promise.all(
      Array.from({ length: opts.concurrency }, async () => {
        const client = await pool.connect();
        try {
          while (performance.now() < stopAt && next < opts.maxTransactions) {
            await credit(client, ++next);
            done++;
          }
        } finally {
          client.release();
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    await truncateAll(pool);
    return { transactionsPerSecond: done / seconds, concurrency: opts.concurrency, transactions: done, seconds };
  } finally {
    await pool.end();
  }
}
