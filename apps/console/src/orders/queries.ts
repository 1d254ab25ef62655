import type { Db } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Queue } from 'bullmq';
import { z } from 'zod';
import { orderViewSchema } from './schemas.ts';
import { findOrder, orderView } from './repo.ts';
import { loadCallbackRecords, timelineEntrySchema, timelineOf } from './timeline.ts';

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
});
export type OrderDetail = z.output<typeof orderDetailSchema>;

export async function orderDetail(db: Db, queue: Queue | undefined, merchantOrderNo: string): Promise<OrderDetail> {
  const order = await findOrder(db, merchantOrderNo);
  if (!order) throw new AppError(ErrorCodes.NOT_FOUND, `no order ${merchantOrderNo}`, { details: { merchantOrderNo } });
  const [view, { timeline, jobs }] = await Promise.all([
    orderView(db, order),
    loadCallbackRecords(db.db, queue, { merchantOrderNo: order.merchantOrderNo }).then(async (records) => ({
      timeline: await timelineOf(db.db, queue, records),
      jobs: records.jobs.map(({ job, state }) => ({ jobId: job.id!, state, attemptsMade: job.attemptsMade })),
    })),
  ]);
  return { ...view, timeline, jobs };
}
