import type { Db } from '@mcb/core/db';
import type { Logger } from '@mcb/core/logger';
import type { Queue } from 'bullmq';
import { z } from 'zod';
import { listReviews } from '../reviews/queries.ts';
import { merchantOrderNoSchema } from './schemas.ts';
import { actorOf } from '../operators/operator.ts';
import { safeNext } from '../session/pages.ts';
import { formRoute, pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { replayJob } from './actions.ts';
import { jobParams, jobTarget, ownerOf } from './api.ts';
import { orderDetail, orderMerchantOf } from './queries.ts';
import { orderCandidatesPage, orderPage } from './views.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';

/** What the order pages need; without the queue the timeline shows the database's story and replays fail. */
export interface OrdersPagesDeps {
  db: Db;
  queue?: Queue;
  /** The callbacks queue of the merchant with this number (several merchants); undefined: `queue`. */
  queueOf?: (merchantNo: string) => Queue | undefined;
  logger: Logger;
  /** The merchant a console served before merchants were named (RouteDeps.merchantNo). */
  merchantNo: string;
  /** The merchants it serves: `?merchant=` picks one; a number two of them hold lists them. */
  merchants: ConsoleMerchants;
}

/** `/orders/{merchantOrderNo}`: the same query as `GET /api/orders/{no}`, as a page; and its "Replay this job". */
export function ordersPageRows({ db, queue, queueOf, logger, merchants }: OrdersPagesDeps): RouteRow[] {
  return [
    pageRoute({
      url: '/orders/:merchantOrderNo',
      action: 'read',
      handler: async (req, reply) => {
        const { merchantOrderNo } = z.object({ merchantOrderNo: merchantOrderNoSchema }).parse(req.params);
        const ref = (req.query as { merchant?: unknown }).merchant;
        const found = await orderMerchantOf(
          db.db,
          merchants,
          merchantOrderNo,
          typeof ref === 'string' && ref !== '' ? ref : undefined,
          req.operator,
        );
        // Two merchants hold the number and none was named: the page lists them, each a link to its order.
        if ('candidates' in found)
          return sendPage(
            req,
            reply,
            { title: `Order ${merchantOrderNo}`, area: 'search' },
            orderCandidatesPage(
              merchantOrderNo,
              found.candidates.map((c) => c.merchant.ref),
            ),
          );
        const merchantNo = found.merchant.merchant.merchantNo;
        const [detail, reviews] = await Promise.all([
          orderDetail(db.db, queueOf?.(merchantNo) ?? queue, { merchantNo, merchantOrderNo }, merchants.several),
          listReviews(
            db.db,
            { status: 'open', merchantOrderNo, limit: 20 },
            req.operator!.role,
            merchants.several ? merchantNo : undefined,
          ),
        ]);
        const shown = merchants.several ? { ...detail, merchant: found.merchant.merchant.ref } : detail;
        return sendPage(
          req,
          reply,
          { title: `Order ${merchantOrderNo}`, area: 'search', flash: flashOf(req.query) },
          orderPage(shown, reviews.reviews, req.operator!, req.url.split('?')[0]!),
        );
      },
    }),

    /** "Replay this job": the same action as the API, from the timeline's form. */
    formRoute({
      url: '/orders/:merchantOrderNo/jobs/:jobId/replay',
      action: 'queue.retry',
      target: (req) => jobTarget(queue?.name ?? 'callbacks', req),
      params: jobParams,
      form: z.object({ reason: z.string().optional() }),
      back: (req) =>
        safeNext(
          `/orders/${encodeURIComponent(String((req.params as { merchantOrderNo?: unknown }).merchantOrderNo))}`,
        ),
      run: async (req, { params: { merchantOrderNo, jobId }, form }) => {
        const merchantNo = await ownerOf(db.db, merchants, merchantOrderNo, req.query);
        const own = (merchantNo !== null ? queueOf?.(merchantNo) : undefined) ?? queue;
        if (!own) throw new Error('no queue configured');
        await replayJob(
          { db: db.db, logger, queue: own, merchantNo },
          actorOf(req),
          merchantOrderNo,
          jobId,
          form.reason,
        );
        return `Job ${jobId} sent back to the queue with a fresh retry budget; its failure stays on the timeline.`;
      },
    }),
  ];
}
