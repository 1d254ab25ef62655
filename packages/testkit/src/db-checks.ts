import { callbackReceipts, ledgerEntries, orderEvents, orders, reviews, type Database } from '@mcb/core/db';
import { and, eq } from 'drizzle-orm';

/** Everything the pipeline wrote about one of our orders (of `merchantNo`, when given), for assertions. */
export async function orderState(db: Database, merchantOrderNo: string, merchantNo?: string) {
  const [order] = await db
    .select()
    .from(orders)
    .where(
      merchantNo === undefined
        ? eq(orders.merchantOrderNo, merchantOrderNo)
        : and(eq(orders.merchantOrderNo, merchantOrderNo), eq(orders.merchantNo, merchantNo)),
    );
  if (!order) throw new Error(`no order ${merchantOrderNo}`);
  const [ledger, receipts, events, openReviews] = await Promise.all([
    db.select().from(ledgerEntries).where(eq(ledgerEntries.orderId, order.id)),
    db.select().from(callbackReceipts).where(eq(callbackReceipts.orderId, order.id)),
    db.select().from(orderEvents).where(eq(orderEvents.orderId, order.id)),
    db
      .select()
      .from(reviews)
      .where(
        merchantNo === undefined
          ? eq(reviews.merchantOrderNo, merchantOrderNo)
          : and(eq(reviews.merchantOrderNo, merchantOrderNo), eq(reviews.merchantNo, merchantNo)),
      ),
  ]);
  return { order, ledger, receipts, events, reviews: openReviews };
}

/** Reviews recorded for a merchant order number (the order itself may not exist). */
export async function reviewsFor(db: Database, merchantOrderNo: string) {
  return db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo));
}
