import type { Database } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { loadCallbackRecords, timelineEntrySchema, timelineOf, type FoundJob } from '../orders/timeline.ts';
import { errorBodySchema, merchantOrderNoSchema } from '../schemas.ts';

/** Options of {@link callbacksRoutes}. */
export interface CallbacksDeps {
  db: Database;
  /** The callbacks queue; when given and `orderNo` is asked, the jobs of that order are listed too. */
  queue?: Queue;
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

const receiptSchema = z.object({
  orderNo: z.string(),
  state: z.number().int(),
  kind: z.enum(['payin', 'payout']),
  merchantOrderNo: z.string(),
  source: z.enum(['callback', 'reconcile', 'review']),
  outcome: z.enum(['credited', 'succeeded', 'refused']),
  payTime: z.string().nullable(),
  fiatAmount: z.string().nullable().describe('Pay-in FiatCurrency as the callback sent it'),
  confirmedAmount: z.string().describe('The amount Get order confirmed'),
  jobId: z.string().nullable(),
  receivedAt: z.string().nullable(),
  appliedAt: z.string(),
});
const reviewSchema = z.object({
  id: z.number().int(),
  orderNo: z.string(),
  state: z.number().int(),
  merchantOrderNo: z.string(),
  reasonCode: z.string(),
  reason: z.string(),
  status: z.enum(['open', 'resolved', 'dismissed']),
  occurrences: z.number().int(),
  createdAt: z.string(),
  closedAt: z.string().nullable(),
});
const jobSchema = z.object({
  jobId: z.string(),
  state: z.string().describe('BullMQ state: waiting, active, delayed, completed, failed, ...'),
  attemptsMade: z.number().int(),
  failedReason: z.string().nullable(),
  timestamp: z.string(),
  finishedOn: z.string().nullable(),
});

/**
 * `GET /api/callbacks?orderNo=&merchantOrderNo=`: what arrived for an order, when, and what happened. Receipts
 * (applied events), reviews (events that failed verification) and, by platform OrderNo, the queue's jobs (still
 * waiting, retrying or failed), and the whole story in time order (`timeline`). What bull-board cannot search, this can.
 */
export const callbacksRoutes: FastifyPluginAsyncZod<CallbacksDeps> = async (app, { db, queue }) => {
  app.get(
    '/api/callbacks',
    {
      schema: {
        summary: 'Search callbacks by order number',
        description: 'At least one of `orderNo` (the platform\'s) and `merchantOrderNo` (ours) is required; both narrow together.',
        tags: ['callbacks'],
        querystring: z.strictObject({
          orderNo: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected a platform OrderNo').optional(),
          merchantOrderNo: merchantOrderNoSchema.optional(),
        }),
        response: {
          200: z.object({
            receipts: z.array(receiptSchema),
            reviews: z.array(reviewSchema),
            jobs: z.array(jobSchema),
            timeline: z.array(timelineEntrySchema).describe('Everything above and each job attempt, oldest first'),
          }),
          400: errorBodySchema,
        },
      },
    },
    async (req) => {
      const { orderNo, merchantOrderNo } = req.query;
      if (!orderNo && !merchantOrderNo) {
        throw new AppError(ErrorCodes.REQUEST_INVALID, 'give orderNo or merchantOrderNo', {
          details: { errors: [{ field: 'querystring', message: 'orderNo or merchantOrderNo is required' }] },
        });
      }
      const records = await loadCallbackRecords(db, queue, { orderNo, merchantOrderNo });
      const { receipts: receiptRows, reviews: reviewRows } = records;
      const timeline = await timelineOf(db, queue, records);
      // `jobs` lists the asked platform order's jobs (the timeline also has those its receipts and reviews name).
      const jobs = orderNo ? records.jobs.filter((j) => (j.job.data as { orderNo?: unknown }).orderNo === orderNo).map(jobView) : [];
      return {
        receipts: receiptRows.map((r) => ({
          orderNo: r.orderNo,
          state: r.state,
          kind: r.kind,
          merchantOrderNo: r.merchantOrderNo,
          source: r.source,
          outcome: r.outcome,
          payTime: iso(r.payTime),
          fiatAmount: r.fiatAmount,
          confirmedAmount: r.confirmedAmount,
          jobId: r.jobId,
          receivedAt: iso(r.receivedAt),
          appliedAt: r.appliedAt.toISOString(),
        })),
        reviews: reviewRows.map((r) => ({
          id: r.id,
          orderNo: r.orderNo,
          state: r.state,
          merchantOrderNo: r.merchantOrderNo,
          reasonCode: r.reasonCode,
          reason: r.reason,
          status: r.status,
          occurrences: r.occurrences,
          createdAt: r.createdAt.toISOString(),
          closedAt: iso(r.closedAt),
        })),
        jobs,
        timeline,
      };
    },
  );
};

function jobView({ job, state }: FoundJob) {
  return {
    jobId: job.id ?? '',
    state,
    attemptsMade: job.attemptsMade,
    failedReason: job.failedReason ?? null,
    timestamp: new Date(job.timestamp).toISOString(),
    finishedOn: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}
