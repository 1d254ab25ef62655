import type { Database, Order } from '@mcb/core/db';
import type pg from 'pg';
import { commitStarted } from './commit-watch.ts';
import { discardsConnection } from './retry-policy.ts';

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

/** Options of {@link inTransaction}. */
export interface TransactionOptions<T> {
  /** Statements without parameters run right after BEGIN, in the same round trip (e.g. `SET LOCAL ...`). */
  setup?: string;
  /**
   * Called when COMMIT itself fails (typically the connection dropped after the server received it): the outcome is
   * unknown, and only a fresh look at the database can tell. Return `result` when the transaction is found
   * committed; throw (the original error) when it is not or cannot be known.
   */
  ifCommitFails?: (result: T, error: unknown) => Promise<T>;
}

/**
 * Run `fn` in one transaction on one pooled connection: COMMIT when it returns, ROLLBACK when it throws. The COMMIT
 * is watched while it waits (commit-watch.ts: a synchronous standby gone makes it wait without end). A connection
 * that answered an error saying it reaches the wrong server or was ended (`discardsConnection`: 25006 read-only,
 * 57P0x, class 08, a lost socket) is closed, not pooled, so the next attempt connects afresh to the new primary;
 * so is one whose ROLLBACK or COMMIT failed. Statements outside a transaction (`pool.query`, drizzle's) already close
 * their connection on any error.
 */
export async function inTransaction<T>(
  db: Database,
  fn: (client: pg.PoolClient) => Promise<T>,
  options: TransactionOptions<T> = {},
): Promise<T> {
  const pool = poolOf(db);
  const client = await pool.connect();
  let result: T;
  try {
    await client.query(options.setup ? `BEGIN; ${options.setup}` : 'BEGIN');
    result = await fn(client);
  } catch (e) {
    let discard: Error | undefined = discardsConnection(e)
      ? e instanceof Error
        ? e
        : new Error('connection discarded')
      : undefined;
    try {
      await client.query('ROLLBACK');
    } catch (rollbackError) {
      // The connection is gone (server restart): the server rolled back; do not return it to the pool.
      discard = rollbackError instanceof Error ? rollbackError : new Error('ROLLBACK failed');
    }
    client.release(discard);
    throw e;
  }
  const committed = commitStarted(pool);
  try {
    await client.query('COMMIT');
  } catch (e) {
    // The connection's state is unknown: never reuse it.
    client.release(e instanceof Error ? e : new Error('COMMIT failed'));
    if (options.ifCommitFails) return options.ifCommitFails(result, e);
    throw e;
  } finally {
    committed();
  }
  client.release();
  return result;
}

/** The `orders` row as pg returns it. */
export interface OrderRow {
  id: string | number;
  merchant_no: string;
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
    'merchant_no',
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
    merchantNo: row.merchant_no,
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
