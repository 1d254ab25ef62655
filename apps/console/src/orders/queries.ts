import type { Database } from '@mcb/core/db';
import { findOrder, type OrderKey } from '@mcb/settlement';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Queue } from 'bullmq';
import { z } from 'zod';
import { orderViewSchema } from './schemas.ts';
import { orderView } from './repo.ts';
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

export async function orderDetail(db: Database, queue: Queue | undefined, key: OrderKey): Promise<OrderDetail> {
  const { merchantOrderNo } = key;
  const order = await findOrder(db, key);
  if (!order) throw new AppError(ErrorCodes.NOT_FOUND, `no order ${merchantOrderNo}`, { details: { merchantOrderNo } });
  const [view, { timeline, jobs, callbacksKnown }] = await Promise.all([
    orderView(db, order),
    loadCallbackRecords(db, queue, { merchantOrderNo: order.merchantOrderNo }).then(async (records) => {
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
