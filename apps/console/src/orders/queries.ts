import type { Database } from '@mcb/core/db';
import { findOrder, type OrderKey } from '@mcb/settlement';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Queue } from 'bullmq';
import { z } from 'zod';
import { orderViewSchema } from './schemas.ts';
import { merchantsHolding, orderView } from './repo.ts';
import type { Operator } from '../operators/operator.ts';
import { merchantsInScope, readingMerchant } from '../operators/scope.ts';
import type { ConsoleMerchant, ConsoleMerchants } from '../web/route-deps.ts';
import { queueAgainstLists, waitingCounts } from '../callbacks/counts.ts';
import { loadCallbackRecords, timelineEntrySchema, timelineOf, type TimelineEntry } from './timeline.ts';

/** An order with its ledger, open review and callback timeline: `GET /api/orders/{no}` and the order page. */
export const orderDetailSchema = orderViewSchema.extend({
  timeline: z
    .array(timelineEntrySchema)
    .describe('Its callbacks, job attempts, receipt, ledger and reviews, oldest first'),
  jobs: z
    .array(
      z.object({
        jobId: z.string(),
        state: z.string().describe("BullMQ's state: failed, waiting, delayed, active, completed"),
        attemptsMade: z.number().int(),
      }),
    )
    .describe("Its callbacks' jobs still on the queue (a failed one can be replayed)"),
  callbacksKnown: z
    .enum(['all', 'lists-behind-queue', 'queue-unreadable'])
    .describe(
      'Whether an empty timeline means no callback arrived: `all` when a callback of the order is listed or the ' +
        "queue's counts agree with the lists; `lists-behind-queue` when the queue holds callbacks the lists have no " +
        'row for yet (after a database outage, or not taken by a worker yet); `queue-unreadable` when the queue could ' +
        'not be read',
    ),
});
export type OrderDetail = z.output<typeof orderDetailSchema>;

/**
 * The order of `key` with its callbacks' story. `scoped` (several merchants): only the callbacks in its merchant's
 * name, from its merchant's queue; one merchant: every callback naming the order number (a forgery in another
 * number's name included).
 */
export async function orderDetail(
  db: Database,
  queue: Queue | undefined,
  key: OrderKey,
  scoped = false,
): Promise<OrderDetail> {
  const { merchantOrderNo } = key;
  const order = await findOrder(db, key);
  if (!order) throw new AppError(ErrorCodes.NOT_FOUND, `no order ${merchantOrderNo}`, { details: { merchantOrderNo } });
  const [view, { timeline, jobs, callbacksKnown }] = await Promise.all([
    orderView(db, order),
    loadCallbackRecords(db, queue, {
      merchantOrderNo: order.merchantOrderNo,
      ...(scoped ? { merchantNo: order.merchantNo } : {}),
    }).then(async (records) => {
      const timeline = await timelineOf(db, queue, records);
      return {
        timeline,
        jobs: records.jobs.map(({ job, state }) => ({ jobId: job.id!, state, attemptsMade: job.attemptsMade })),
        callbacksKnown: await callbacksKnownOf(db, queue, timeline),
      };
    }),
  ]);
  return { ...view, timeline, jobs, callbacksKnown };
}

/**
 * Whether the order's timeline can be taken as all that arrived. Its jobs are found through the lists' rows (a job id
 * holds the platform's OrderNo, which only a row names), so with no callback listed, the order page may say "none
 * arrived" only when the queue's counts agree with the lists'.
 */
async function callbacksKnownOf(
  db: Database,
  queue: Queue | undefined,
  timeline: readonly TimelineEntry[],
): Promise<OrderDetail['callbacksKnown']> {
  if (timeline.some((e) => e.event === 'received' || e.source === 'receipt')) return 'all';
  const against = await queueAgainstLists(queue, await waitingCounts(db));
  if (against.agree) return 'all';
  return 'unreadable' in against ? 'queue-unreadable' : 'lists-behind-queue';
}

/**
 * Whose order `merchantOrderNo` is, for a read: the merchant `ref` names (400 when unknown); with one merchant, it;
 * with several and none named, the one merchant holding that number, or `candidates` when two or more hold it (the API
 * answers 409 MERCHANT_REQUIRED, the page lists them). None holding it: 404.
 */
export async function orderMerchantOf(
  db: Database,
  merchants: ConsoleMerchants,
  merchantOrderNo: string,
  ref: string | undefined,
  reader: Pick<Operator, 'scope'> = {},
): Promise<{ merchant: ConsoleMerchant } | { candidates: ConsoleMerchant[] }> {
  // A ref outside the reader's scope is the 400 of an unknown one; an order of such a merchant is the 404 of a missing
  // one (only the reader's merchants are asked whether they hold the number), so that neither tells it exists.
  if (ref !== undefined) return { merchant: readingMerchant(reader, merchants, ref) };
  const visible = merchantsInScope(reader, merchants);
  if (!merchants.several && visible.length === 1) return { merchant: visible[0]! };
  const holding = await merchantsHolding(
    db,
    merchantOrderNo,
    visible.map((m) => m.merchant.merchantNo),
  );
  const candidates = holding.map((no) => merchants.byNo(no)!);
  if (candidates.length === 0)
    throw new AppError(ErrorCodes.NOT_FOUND, `no order ${merchantOrderNo}`, { details: { merchantOrderNo } });
  return candidates.length === 1 ? { merchant: candidates[0]! } : { candidates };
}

/** The 409 of a read that names no merchant when several hold the number; `details.merchants` lists their refs. */
export function merchantRequired(merchantOrderNo: string, candidates: readonly ConsoleMerchant[]): AppError {
  const refs = candidates.map((c) => c.merchant.ref);
  return new AppError(
    ErrorCodes.MERCHANT_REQUIRED,
    `order ${merchantOrderNo} exists for ${refs.length} merchants (${refs.join(', ')}): name one with ?merchant=`,
    { details: { merchantOrderNo, merchants: refs } },
  );
}

/** A view with its merchant's ref when the console serves several merchants (one merchant: the shape as before). */
export function withMerchant<V extends object>(
  view: V,
  merchants: ConsoleMerchants,
  merchant: ConsoleMerchant,
): V & { merchant?: string } {
  return merchants.several ? { merchant: merchant.merchant.ref, ...view } : view;
}
