import type { Database } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { MerchantQueues } from './merchant-queues.ts';
import { z } from 'zod';
import { loadCallbackRecords, timelineEntrySchema, timelineOf, type FoundJob } from '../orders/timeline.ts';
import { callbackFilterSchema, callbackPageSchema, hasFilter, searchCallbacks, type CallbackPage } from './queries.ts';
import { reviewSummary, reviewSummarySchema } from '../reviews/queries.ts';
import { errorBodySchema } from '../web/api-schemas.ts';
import { iso } from '../web/format.ts';
import { route, type RouteRow } from '../web/route-table.ts';
import { listScopeOf } from '../operators/scope.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';

/** Options of {@link callbacksRoutes}. */
export interface CallbacksDeps {
  db: Database;
  /** Every merchant's callbacks queue; when given and an order is asked, its jobs are listed too. */
  queues?: MerchantQueues | undefined;
  /** The console's merchants: `?merchant=` and operators' scopes. @defaultValue none (every merchant's) */
  merchants?: ConsoleMerchants;
}

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
const jobSchema = z.object({
  jobId: z.string(),
  state: z.string().describe('BullMQ state: waiting, active, delayed, completed, failed, ...'),
  attemptsMade: z.number().int(),
  failedReason: z.string().nullable(),
  timestamp: z.string(),
  finishedOn: z.string().nullable(),
});

/**
 * `GET /api/callbacks?...`: every callback a worker took that matches the filter (`callbacks`, newest first, a
 * page at a time), from Postgres indexes. Given an order number, also what happened to that order: receipts
 * (applied events), reviews (events that failed verification), the queue's jobs (still waiting, retrying or
 * failed) and the whole story in time order (`timeline`). What bull-board cannot search, this can.
 */
export function callbacksRows({ db, queues, merchants }: CallbacksDeps): RouteRow[] {
  return [
    route({
      method: 'GET',
      url: '/api/callbacks',
      action: 'read',
      schema: {
        summary: 'Search callbacks',
        description:
          'At least one filter is required; all narrow together. `receipts`, `reviews`, `jobs` and ' +
          "`timeline` are filled when `orderNo` (the platform's) or `merchantOrderNo` (ours) is given.",
        tags: ['callbacks'],
        querystring: callbackFilterSchema.extend({
          cursor: z.string().max(200).optional().describe('`nextCursor` of the previous page'),
          limit: z.coerce.number().int().min(1).max(200).default(50).describe('Rows per page (1-200)'),
        }),
        response: {
          200: callbackPageSchema.extend({
            receipts: z.array(receiptSchema),
            reviews: z.array(reviewSummarySchema),
            jobs: z.array(jobSchema),
            timeline: z.array(timelineEntrySchema).describe('Everything above and each job attempt, oldest first'),
          }),
          400: errorBodySchema,
        },
      },
      handler: async (req) => {
        const { cursor, limit, ...filter } = req.query;
        if (!hasFilter(filter)) {
          throw new AppError(ErrorCodes.REQUEST_INVALID, 'give at least one filter (e.g. merchantOrderNo)', {
            details: { errors: [{ field: 'querystring', message: 'at least one filter is required' }] },
          });
        }
        const { orderNo, merchantOrderNo } = filter;
        // `merchant` narrows to that merchant's rows and queue (400 for a ref this deployment does not serve).
        // A ref outside the operator's merchants is the 400 of an unknown one; none: every merchant it sees.
        const { merchantNos, refOf } = listScopeOf(req.operator!, merchants, filter.merchant);
        const named = (p: CallbackPage): CallbackPage =>
          refOf ? { ...p, callbacks: p.callbacks.map((c) => ({ ...c, merchant: refOf(c.merchantNo) })) } : p;
        const mq = filter.merchant === undefined ? undefined : queues?.of(filter.merchant);
        const scoped = { ...filter, merchantNo: queues?.several ? mq?.merchantNo : undefined, merchantNos };
        const seen = (no: string) => merchantNos === undefined || merchantNos.includes(no);
        const queue = (mq ?? queues?.list.find((m) => seen(m.merchantNo)))?.queue;
        if (!orderNo && !merchantOrderNo)
          return {
            ...named(await searchCallbacks(db, scoped, { cursor, limit })),
            receipts: [],
            reviews: [],
            jobs: [],
            timeline: [],
          };
        const [page, records] = await Promise.all([
          searchCallbacks(db, scoped, { cursor, limit }),
          loadCallbackRecords(db, queue, { orderNo, merchantOrderNo }),
        ]);
        const receiptRows = records.receipts.filter((r) => seen(r.merchantNo));
        const reviewRows = records.reviews.filter((r) => seen(r.merchantNo));
        const timeline = await timelineOf(db, queue, { ...records, receipts: receiptRows, reviews: reviewRows });
        // `jobs` lists the asked order's jobs (the timeline also has those its receipts and reviews name).
        const jobs = (
          orderNo ? records.jobs.filter((j) => (j.job.data as { orderNo?: unknown }).orderNo === orderNo) : records.jobs
        ).map(jobView);
        return {
          ...named(page),
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
          reviews: reviewRows.map(reviewSummary),
          jobs,
          timeline,
        };
      },
    }),
  ];
}

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
