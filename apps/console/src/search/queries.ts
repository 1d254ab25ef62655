import { orders, type Db } from '@mcb/core/db';
import { and, desc, eq, inArray } from 'drizzle-orm';
import {
  merchantsAgainstLists,
  queueAgainstLists,
  waitingCounts,
  type QueueAgainstLists,
  type WaitingCounts,
} from '../callbacks/counts.ts';
import type { Operator } from '../operators/operator.ts';
import { merchantsInScope } from '../operators/scope.ts';
import type { Queue } from 'bullmq';
import { merchantsHolding } from '../orders/repo.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import { loadCallbackRecords, timelineOf, type CallbackRecords, type TimelineEntry } from '../orders/timeline.ts';

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
async function ordersOfCustomer(db: Db, customerId: string, merchantNos?: readonly string[]): Promise<CustomerOrder[]> {
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
    .where(
      and(eq(orders.customerId, customerId), merchantNos ? inArray(orders.merchantNo, [...merchantNos]) : undefined),
    )
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
  scope?: SearchScope,
): Promise<FoundNumber> {
  // Every merchant's orders the reader sees (issue 50, 51): a number one merchant holds opens its order (named when
  // there are several); a number several hold opens the order page's list of them.
  const reader = scope?.reader ?? {};
  const seen = merchantsInScope(reader, merchants).map((m) => m.merchant.merchantNo);
  const holders = (merchantOrderNo: string) => merchantsHolding(db.db, merchantOrderNo, seen);
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
  const theirs = query.length <= 128 ? await ordersOfCustomer(db, query, reader.scope ? seen : undefined) : [];
  if (theirs.length === 1) return { kind: 'order', merchantOrderNo: theirs[0]!.merchantOrderNo };
  if (theirs.length > 1) return { kind: 'customer', query, orders: theirs };
  if (!ORDER_NO.test(query)) return { kind: 'nothing', query };
  // A platform number: each merchant's records and queue the reader sees (one merchant: its queue, as before), the
  // first that knows the number.
  const lanes =
    scope && (scope.merchants.several || reader.scope)
      ? seen.map((no) => ({ queue: scope.queueOf(no), merchantNo: scope.merchants.several ? no : undefined }))
      : [{ queue, merchantNo: undefined }];
  const some = (r: CallbackRecords) => r.receipts.length + r.reviews.length + r.jobs.length > 0;
  let records: CallbackRecords = { receipts: [], reviews: [], jobs: [] };
  let laneQueue = queue;
  search: for (const s of spellings) {
    for (const lane of lanes) {
      records = await loadCallbackRecords(db.db, lane.queue, { orderNo: s, merchantNo: lane.merchantNo });
      laneQueue = lane.queue;
      if (some(records)) break search;
    }
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
  const timeline = await timelineOf(db.db, laneQueue, records);
  return timeline.length > 0 ? { kind: 'callbacks', query, timeline } : { kind: 'nothing', query };
}

/**
 * What waits for a person, shown under the search box: failed, retrying and waiting callbacks, open reviews; and
 * whether the queue's own counts agree with the lists'.
 */
export async function waiting(
  db: Db,
  queue: Queue | undefined,
  scope?: SearchScope,
): Promise<{ counts: WaitingCounts; against: QueueAgainstLists }> {
  // One merchant (as before): its rows against its queue. Several, or a scoped reader: each merchant it sees against
  // its own queue.
  if (!scope || (!scope.reader.scope && !scope.merchants.several)) {
    const counts = await waitingCounts(db.db);
    return { counts, against: await queueAgainstLists(queue, counts) };
  }
  const seen = merchantsInScope(scope.reader, scope.merchants);
  const nos = seen.map((m) => m.merchant.merchantNo);
  const [counts, against] = await Promise.all([
    waitingCounts(db.db, scope.reader.scope ? nos : undefined),
    merchantsAgainstLists(
      db.db,
      nos.map((no) => ({ merchantNo: no, queue: scope.queueOf(no) })),
    ),
  ]);
  return { counts, against };
}

/** Who searches, and the queues of the merchants: the search reads every merchant the reader sees. */
export interface SearchScope {
  reader: Pick<Operator, 'scope'>;
  merchants: ConsoleMerchants;
  /** The callbacks queue of the merchant with this number. */
  queueOf: (merchantNo: string) => Queue | undefined;
}
