import { and, asc, desc, eq, inArray } from 'drizzle-orm';
import { ledgerEntries, orders, reviews, type Database, type NewOrder, type Order } from '@mcb/core/db';
import { normalizeDecimal } from '@mcb/core/money';
import type { OrderView } from './schemas.ts';

/**
 * One query per function: the console's reads and writes of orders. An order by its number is settlement's
 * `findOrder` (the one the money path reads).
 */

/** Insert unless the number exists; returns the new row, or undefined when another registration holds it. */
export async function insertOrderIfAbsent(db: Database, order: NewOrder): Promise<Order | undefined> {
  const [row] = await db
    .insert(orders)
    .values(order)
    .onConflictDoNothing({ target: [orders.merchantNo, orders.merchantOrderNo] })
    .returning();
  return row;
}

async function ledgerOf(db: Database, orderId: number) {
  return db
    .select({
      entryType: ledgerEntries.entryType,
      amount: ledgerEntries.amount,
      currency: ledgerEntries.currency,
      createdAt: ledgerEntries.createdAt,
    })
    .from(ledgerEntries)
    .where(eq(ledgerEntries.orderId, orderId))
    .orderBy(asc(ledgerEntries.id));
}

/** The newest open review of a callback for this merchant's order number (a resolved or dismissed one is history). */
async function openReviewOf(db: Database, merchantNo: string, merchantOrderNo: string) {
  const [row] = await db
    .select({ reason: reviews.reason, at: reviews.createdAt })
    .from(reviews)
    .where(
      and(eq(reviews.merchantNo, merchantNo), eq(reviews.merchantOrderNo, merchantOrderNo), eq(reviews.status, 'open')),
    )
    .orderBy(desc(reviews.id))
    .limit(1);
  return row;
}

/** The order as GET /api/orders/{merchantOrderNo} shows it: with its ledger and its open review. */
export async function orderView(db: Database, order: Order): Promise<OrderView> {
  const [ledger, review] = await Promise.all([
    ledgerOf(db, order.id),
    openReviewOf(db, order.merchantNo, order.merchantOrderNo),
  ]);
  return {
    merchantOrderNo: order.merchantOrderNo,
    kind: order.kind,
    status: order.status,
    currency: order.currency,
    amount: normalizeDecimal(order.amount),
    platformOrderNo: order.platformOrderNo,
    customerId: order.customerId ?? null,
    ledger: ledger.map((e) => ({
      entryType: e.entryType,
      amount: normalizeDecimal(e.amount),
      currency: e.currency,
      createdAt: e.createdAt.toISOString(),
    })),
    review: review ? { reason: review.reason, at: review.at.toISOString() } : null,
  };
}

/** The merchant numbers, among `merchantNos`, that hold an order `merchantOrderNo` (two merchants may use one number). */
export async function merchantsHolding(
  db: Database,
  merchantOrderNo: string,
  merchantNos: readonly string[],
): Promise<string[]> {
  const rows = await db
    .select({ merchantNo: orders.merchantNo })
    .from(orders)
    .where(and(eq(orders.merchantOrderNo, merchantOrderNo), inArray(orders.merchantNo, [...merchantNos])))
    .orderBy(asc(orders.id));
  return rows.map((r) => r.merchantNo);
}
