import type { Database, Order } from '@mcb/core/db';
import type pg from 'pg';

/**
 * The node-postgres pool under a drizzle handle. The set-based statements of the money path (look-ups and group
 * commit) are written in SQL and sent straight to pg: one statement per batch, arrays bound as parameters and
 * expanded with `unnest`, without the query builder's per-row cost.
 */
export function poolOf(db: Database): pg.Pool {
  const client = (db as Database & { $client?: pg.Pool }).$client;
  if (!client || typeof client.connect !== 'function' || !('totalCount' in client)) {
    throw new TypeError('the money path needs a drizzle handle made over a pg.Pool (createDb)');
  }
  return client;
}

/** Run `fn` in one transaction on one pooled connection: COMMIT when it returns, ROLLBACK when it throws. */
export async function inTransaction<T>(db: Database, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await poolOf(db).connect();
  let broken: unknown;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (e) {
    try {
      await client.query('ROLLBACK');
    } catch (rollbackError) {
      // The connection is gone (server restart): the server rolled back; do not return it to the pool.
      broken = rollbackError;
    }
    throw e;
  } finally {
    client.release(broken instanceof Error ? broken : undefined);
  }
}

/** The `orders` row as pg returns it. */
export interface OrderRow {
  id: string | number;
  merchant_order_no: string;
  kind: Order['kind'];
  currency: string;
  amount: string;
  customer_id: string | null;
  payment_method: number | null;
  payout_params: Record<string, string> | null;
  status: Order['status'];
  platform_order_no: string | null;
  request_hash: string;
  created_at: Date;
  updated_at: Date;
  finalized_at: Date | null;
}

/** The columns of {@link OrderRow}, for a SELECT list (qualified by `alias`). */
export function orderColumns(alias: string): string {
  return [
    'id',
    'merchant_order_no',
    'kind',
    'currency',
    'amount',
    'customer_id',
    'payment_method',
    'payout_params',
    'status',
    'platform_order_no',
    'request_hash',
    'created_at',
    'updated_at',
    'finalized_at',
  ]
    .map((c) => `${alias}.${c}`)
    .join(', ');
}

/** An `orders` row in the shape drizzle gives (`Order`). */
export function toOrder(row: OrderRow): Order {
  return {
    id: Number(row.id),
    merchantOrderNo: row.merchant_order_no,
    kind: row.kind,
    currency: row.currency,
    amount: row.amount,
    customerId: row.customer_id,
    paymentMethod: row.payment_method,
    payoutParams: row.payout_params,
    status: row.status,
    platformOrderNo: row.platform_order_no,
    requestHash: row.request_hash,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    finalizedAt: row.finalized_at,
  };
}
