import { callbackReceipts, orders, type Database, type Order } from '@mcb/core/db';
import { and, eq } from 'drizzle-orm';

/** Whether the pair (OrderNo, state) has been applied already (the receipt is the dedup record). */
export async function receiptExists(db: Database, orderNo: string, state: number): Promise<boolean> {
  const rows = await db
    .select({ id: callbackReceipts.id })
    .from(callbackReceipts)
    .where(and(eq(callbackReceipts.orderNo, orderNo), eq(callbackReceipts.state, state)))
    .limit(1);
  return rows.length > 0;
}

/** Our own order by its merchant order number, or undefined. */
export async function findOrder(db: Database, merchantOrderNo: string): Promise<Order | undefined> {
  const rows = await db.select().from(orders).where(eq(orders.merchantOrderNo, merchantOrderNo)).limit(1);
  return rows[0];
}
