import { orders, type Database, type Order } from '@mcb/core/db';
import { and, eq } from 'drizzle-orm';
import { runAlone, type Settled } from '@mcb/core/batcher';
import { orderColumns, poolOf, toOrder, type OrderRow } from './sql.ts';

/**
 * What the money path reads before it calls Get order: is the pair applied, and which order of ours is it. Both are
 * the merchant's own: the event's `merchantNo` (the merchant whose route and key it came by) is in every key.
 */
export interface LookupKey {
  merchantNo: string;
  orderNo: string;
  state: number;
  merchantOrderNo: string;
}

/** One of our orders: whose, and its merchant order number. */
export interface OrderKey {
  merchantNo: string;
  merchantOrderNo: string;
}

/** A receipt as the look-up returns it: what applying it did and the callback content it was applied from. */
export interface AppliedReceipt {
  id: number;
  outcome: 'credited' | 'succeeded' | 'refused';
  kind: 'payin' | 'payout';
  merchantNo: string;
  merchantOrderNo: string;
  /** Pay-in Quantity as applied; null for a payout or an event rebuilt from Get order. */
  quantity: string | null;
  /** Pay-in FiatCurrency as applied; null for a payout. */
  fiatAmount: string | null;
  /** The job it was applied from; null when none was recorded (the sweep's, a direct call). */
  jobId: string | null;
}

/** The answer for one {@link LookupKey}. */
export interface LookupResult {
  /** A receipt of the pair (OrderNo, state) exists: it was applied before. */
  applied: boolean;
  /** That receipt: its id, what applying it did, and the content it was applied from (to tell a forgery from a copy). */
  receipt?: AppliedReceipt | undefined;
  /**
   * When the pair has no receipt but our order is final: the merchant number of a receipt that finalised it (the
   * other pay-in state's), to compare a callback of the order's other state with. @defaultValue undefined
   */
  orderMerchantNo?: string | undefined;
  /** Our order with that merchant number and merchant order number, if any. */
  order: Order | undefined;
}

const LOOKUP_SQL = `
SELECT k.i, r.id AS receipt_id, r.outcome AS receipt_outcome, r.kind AS receipt_kind, r.merchant_no AS receipt_merchant_no,
       r.merchant_order_no AS receipt_merchant_order_no, r.quantity AS receipt_quantity, r.fiat_amount AS receipt_fiat_amount,
       r.job_id AS receipt_job_id,
       f.merchant_no AS order_merchant_no,
       ${orderColumns('o')}
  FROM unnest($1::text[], $2::text[], $3::int[], $4::text[])
         WITH ORDINALITY AS k(merchant_no, order_no, state, merchant_order_no, i)
  LEFT JOIN callback_receipts r ON r.order_no = k.order_no AND r.state = k.state AND r.merchant_no = k.merchant_no
  LEFT JOIN orders o ON o.merchant_order_no = k.merchant_order_no AND o.merchant_no = k.merchant_no
  -- Only for a final order and a pair without a receipt (a callback of the order's other state): read by the
  -- merchant order number index; for the common case (a pending order, or the pair applied) nothing is read.
  LEFT JOIN LATERAL (
    SELECT a.merchant_no FROM callback_receipts a
     WHERE r.id IS NULL AND o.status <> 'pending' AND a.merchant_order_no = o.merchant_order_no
       AND a.order_id = o.id
     ORDER BY a.id LIMIT 1
  ) f ON true
 ORDER BY k.i`;

/** Both reads for many events in one statement (one round trip per batch). */
export async function lookUpEvents(db: Database, keys: readonly LookupKey[]): Promise<Settled<LookupResult>[]> {
  if (keys.length === 0) return [];
  const { rows } = await poolOf(db).query<
    OrderRow & {
      i: string;
      receipt_id: string | null;
      receipt_outcome: AppliedReceipt['outcome'] | null;
      receipt_kind: AppliedReceipt['kind'] | null;
      receipt_merchant_no: string | null;
      receipt_merchant_order_no: string | null;
      receipt_quantity: string | null;
      receipt_fiat_amount: string | null;
      receipt_job_id: string | null;
      order_merchant_no: string | null;
      id: string | null;
    }
  >(LOOKUP_SQL, [
    keys.map((k) => k.merchantNo),
    keys.map((k) => k.orderNo),
    keys.map((k) => k.state),
    keys.map((k) => k.merchantOrderNo),
  ]);
  return rows.map((row) => ({
    ok: true as const,
    value: {
      applied: row.receipt_id !== null,
      receipt:
        row.receipt_id === null
          ? undefined
          : {
              id: Number(row.receipt_id),
              outcome: row.receipt_outcome!,
              kind: row.receipt_kind!,
              merchantNo: row.receipt_merchant_no!,
              merchantOrderNo: row.receipt_merchant_order_no!,
              quantity: row.receipt_quantity,
              fiatAmount: row.receipt_fiat_amount,
              jobId: row.receipt_job_id,
            },
      orderMerchantNo: row.order_merchant_no ?? undefined,
      order: row.id === null ? undefined : toOrder(row),
    },
  }));
}

/** Both reads for one event, alone (a caller without the shared look-up batcher). */
export async function lookUpEvent(db: Database, key: LookupKey): Promise<LookupResult> {
  return runAlone((keys) => lookUpEvents(db, keys), key);
}

/** Our own order by its merchant number and merchant order number, or undefined. */
export async function findOrder(db: Database, key: OrderKey): Promise<Order | undefined> {
  const rows = await db
    .select()
    .from(orders)
    .where(and(eq(orders.merchantOrderNo, key.merchantOrderNo), eq(orders.merchantNo, key.merchantNo)))
    .limit(1);
  return rows[0];
}
