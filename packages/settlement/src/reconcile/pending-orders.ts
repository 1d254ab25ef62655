import { orders, reconcileUnknownOrders, type Database } from '@mcb/core/db';
import { and, asc, count, eq, gte, isNull, lt, lte, or, sql } from 'drizzle-orm';

/** A pending order as the sweep sees it. */
export interface PendingOrder {
  id: number;
  merchantOrderNo: string;
  kind: 'payin' | 'payout';
  /** `created_at` as Postgres text (microseconds kept): the keyset cursor must not lose precision in a JS Date. */
  createdAtText: string;
  /** "Unknown" answers in a row so far (0: none, or a usable answer since). */
  unknownCount: number;
}

/** Keyset position: the last (created_at, id) read. */
export interface PendingCursor {
  createdAtText: string;
  id: number;
}

/**
 * One batch of one merchant's pending orders created in [oldest, newest], after `cursor`, in (created_at, id) order:
 * keyset pagination (index orders_merchant_pending_created_idx), so a batch costs the same at any depth and orders
 * finalised meanwhile never shift the pages. Orders whose "unknown" back-off runs past `now` are left out
 * (unknown-backoff.ts).
 */
export async function pendingOrdersBatch(
  db: Database,
  params: {
    merchantNo: string;
    oldest: Date;
    newest: Date;
    now: Date;
    after: PendingCursor | undefined;
    limit: number;
  },
): Promise<PendingOrder[]> {
  const backoff = reconcileUnknownOrders;
  const after = params.after
    ? sql`(${orders.createdAt}, ${orders.id}) > (${params.after.createdAtText}::timestamptz, ${params.after.id})`
    : undefined;
  return db
    .select({
      id: orders.id,
      merchantOrderNo: orders.merchantOrderNo,
      kind: orders.kind,
      createdAtText: sql<string>`${orders.createdAt}::text`,
      unknownCount: sql<number>`coalesce(${backoff.unknownCount}, 0)`,
    })
    .from(orders)
    .leftJoin(backoff, eq(backoff.orderId, orders.id))
    .where(
      and(
        eq(orders.merchantNo, params.merchantNo),
        eq(orders.status, 'pending'),
        gte(orders.createdAt, params.oldest),
        lte(orders.createdAt, params.newest),
        or(isNull(backoff.orderId), lte(backoff.nextAskAt, params.now)),
        after,
      ),
    )
    .orderBy(asc(orders.createdAt), asc(orders.id))
    .limit(params.limit);
}

/** A merchant's pending orders older than the sweep's window: no sweep looks at them any more, so an operator must. */
export async function countPendingBefore(db: Database, merchantNo: string, oldest: Date): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(orders)
    .where(and(eq(orders.merchantNo, merchantNo), eq(orders.status, 'pending'), lt(orders.createdAt, oldest)));
  return row?.n ?? 0;
}
