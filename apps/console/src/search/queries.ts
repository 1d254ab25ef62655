import { orders, type Db } from '@mcb/core/db';
import { desc, eq } from 'drizzle-orm';
import { queueAgainstLists, waitingCounts, type QueueAgainstLists, type WaitingCounts } from '../callbacks/counts.ts';
import type { Queue } from 'bullmq';
import { merchantsHolding } from '../orders/repo.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import { loadCallbackRecords, timelineOf, type TimelineEntry } from '../orders/timeline.ts';

/** What a search for one number found. */
export type FoundNumber =
  | { kind: 'order'; merchantOrderNo: string; /** whose, when one merchant of several holds it */ merchant?: string }
  | { kind: 'callbacks'; query: string; timeline: TimelineEntry[] }
  | { kind: 'customer'; query: string; orders: CustomerOrder[] }
  | { kind: 'nothing'; query: string };

const ORDER_NO = /^[A-Za-z0-9_.-]{1,64}$/;

/** An order of a customer, as the search lists it. */
export interface CustomerOrder {
  merchantOrderNo: string;
  kind: string;
  status: string;
  amount: string;
  currency: string;
  createdAt: Date;
}

/** The newest orders registered for `customerId` (at most 50; the index orders_customer_id_idx). */
async function ordersOfCustomer(db: Db, customerId: string): Promise<CustomerOrder[]> {
  return db.db
    .select({
      merchantOrderNo: orders.merchantOrderNo,
      kind: orders.kind,
      status: orders.status,
      amount: orders.amount,
      currency: orders.currency,
      createdAt: orders.createdAt,
    })
    .from(orders)
    .where(eq(orders.customerId, customerId))
    .orderBy(desc(orders.id))
    .limit(50);
}

/**
 * Find an order by what an operator has at hand: our merchant order number (what the customer quotes) or the
 * platform's OrderNo (what the platform's support quotes). A platform number whose callbacks name no registered
 * order shows those callbacks' timeline, so "something arrived" is never mistaken for "nothing arrived".
 */
export async function findByNumber(
  db: Db,
  queue: Queue | undefined,
  text: string,
  merchants: ConsoleMerchants,
): Promise<FoundNumber> {
  // Every merchant's orders (issue 50): a number one merchant holds opens its order (named when there are several); a
  // number several hold opens the order page's list of them.
  const holders = (merchantOrderNo: string) =>
    merchantsHolding(
      db.db,
      merchantOrderNo,
      merchants.all.map((m) => m.merchant.merchantNo),
    );
  const opened = (merchantOrderNo: string, holding: readonly string[]): FoundNumber =>
    merchants.several && holding.length === 1
      ? { kind: 'order', merchantOrderNo, merchant: merchants.byNo(holding[0]!)!.merchant.ref }
      : { kind: 'order', merchantOrderNo };
  const query = text.trim();
  if (query === '') return { kind: 'nothing', query };
  // Exact first, then the same number in upper or lower case (what people retype from a phone call): each is one
  // look-up on the unique index, where lower(...) would scan the table.
  const spellings = [...new Set([query, query.toUpperCase(), query.toLowerCase()])];
  if (/^[\x21-\x7e]{1,64}$/.test(query)) {
    for (const s of spellings) {
      const holding = await holders(s);
      if (holding.length > 0) return opened(s, holding);
    }
  }
  // The customer id an order was registered with (what the shop's support has at hand): one order opens, several list.
  const theirs = query.length <= 128 ? await ordersOfCustomer(db, query) : [];
  if (theirs.length === 1) return { kind: 'order', merchantOrderNo: theirs[0]!.merchantOrderNo };
  if (theirs.length > 1) return { kind: 'customer', query, orders: theirs };
  if (!ORDER_NO.test(query)) return { kind: 'nothing', query };
  let records = await loadCallbackRecords(db.db, queue, { orderNo: query });
  for (const s of spellings.slice(1)) {
    if (records.receipts.length + records.reviews.length + records.jobs.length > 0) break;
    records = await loadCallbackRecords(db.db, queue, { orderNo: s });
  }
  const named =
    [...records.receipts, ...records.reviews].map((r) => r.merchantOrderNo).find(Boolean) ??
    records.jobs
      .map((j) => (j.job.data as { merchantOrderNo?: unknown }).merchantOrderNo)
      .find((n): n is string => typeof n === 'string');
  if (named) {
    const holding = await holders(named);
    if (holding.length > 0) return opened(named, holding);
  }
  const timeline = await timelineOf(db.db, queue, records);
  return timeline.length > 0 ? { kind: 'callbacks', query, timeline } : { kind: 'nothing', query };
}

/**
 * What waits for a person, shown under the search box: failed, retrying and waiting callbacks, open reviews; and
 * whether the queue's own counts agree with the lists'.
 */
export async function waiting(
  db: Db,
  queue: Queue | undefined,
): Promise<{ counts: WaitingCounts; against: QueueAgainstLists }> {
  const counts = await waitingCounts(db.db);
  return { counts, against: await queueAgainstLists(queue, counts) };
}
