import { orders, type Database, type Order } from '@mcb/core/db';
import { eq } from 'drizzle-orm';
import type { Settled } from '@mcb/core/batcher';
import { orderColumns, poolOf, toOrder, type OrderRow } from './sql.ts';

/** What the money path reads before it calls Get order: is the pair applied, and which order of ours is it. */
export interface LookupKey {
  orderNo: string;
  state: number;
  merchantOrderNo: string;
}

/** The answer for one {@link LookupKey}. */
export interface LookupResult {
  /** A receipt of the pair (OrderNo, state) exists: it was applied before. */
  applied: boolean;
  /** That receipt: its id and what applying it did. */
  receipt?: { id: number; outcome: 'credited' | 'succeeded' | 'refused' } | undefined;
  /** Our order with that merchant order number, if any. */
  order: Order | undefined;
}

const LOOKUP_SQL = `
SELECT k.i, r.id AS receipt_id, r.outcome AS receipt_outcome,
       ${orderColumns('o')}
  FROM unnest($1::text[], $2::int[], $3::text[]) WITH ORDINALITY AS k(order_no, state, merchant_order_no, i)
  LEFT JOIN callback_receipts r ON r.order_no = k.order_no AND r.state = k.state
  LEFT JOIN orders o ON o.merchant_order_no = k.merchant_order_no
 ORDER BY k.i`;

/** Both reads for many events in one statement (one round trip per batch). */
export async function lookUpEvents(db: Database, keys: readonly LookupKey[]): Promise<Settled<LookupResult>[]> {
  if (keys.length === 0) return [];
  const { rows } = await poolOf(db).query<
    OrderRow & { i: string; receipt_id: string | null; receipt_outcome: 'credited' | 'succeeded' | 'refused' | null; id: string | null }
  >(LOOKUP_SQL, [
    keys.map((k) => k.orderNo),
    keys.map((k) => k.state),
    keys.map((k) => k.merchantOrderNo),
  ]);
  return rows.map((row) => ({
    ok: true as const,
    value: {
      applied: row.receipt_id !== null,
      receipt: row.receipt_id === null ? undefined : { id: Number(row.receipt_id), outcome: row.receipt_outcome! },
      order: row.id === null ? undefined : toOrder(row),
    },
  }));
}

/** Our own order by its merchant order number, or undefined. */
export async function findOrder(db: Database, merchantOrderNo: string): Promise<Order | undefined> {
  const rows = await db.select().from(orders).where(eq(orders.merchantOrderNo, merchantOrderNo)).limit(1);
  return rows[0];
}
