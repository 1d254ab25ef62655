import type { Db } from '@mcb/core/db';
import type { Logger } from '@mcb/core/logger';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { listReviews } from '../reviews/queries.ts';
import { merchantOrderNoSchema } from './schemas.ts';
import { actorOf } from '../operators/operator.ts';
import { safeNext } from '../session/pages.ts';
import { formAction } from '../web/forms.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { jobParams } from './api.ts';
import { orderDetail } from './queries.ts';
import { replayJob } from './replay-job.ts';
import { orderPage } from './views.ts';

/** `/orders/{merchantOrderNo}`: the same query as `GET /api/orders/{no}`, as a page. */
export const ordersPages: FastifyPluginAsync<{ db: Db; queue?: Queue; logger: Logger }> = async (
  app,
  { db, queue, logger },
) => {
  app.get('/orders/:merchantOrderNo', { schema: { hide: true } }, async (req, reply) => {
    const { merchantOrderNo } = z.object({ merchantOrderNo: merchantOrderNoSchema }).parse(req.params);
    const [detail, reviews] = await Promise.all([
      orderDetail(db, queue, merchantOrderNo),
      listReviews(db.db, { status: 'open', merchantOrderNo, limit: 20 }, req.operator!.role),
    ]);
    return sendPage(
      req,
      reply,
      { title: `Order ${merchantOrderNo}`, area: 'search', flash: flashOf(req.query) },
      orderPage(detail, reviews.reviews, req.operator!, req.url.split('?')[0]!),
    );
  });

  /** "Replay this job": the same action as the API, from the timeline's form. */
  app.post('/orders/:merchantOrderNo/jobs/:jobId/replay', { schema: { hide: true } }, async (req, reply) => {
    const { merchantOrderNo, jobId } = jobParams.parse(req.params);
    const body = z.object({ reason: z.string().optional() }).parse(req.body ?? {});
    return formAction(reply, safeNext(`/orders/${encodeURIComponent(merchantOrderNo)}`), async () => {
      if (!queue) throw new Error('no queue configured');
      await replayJob({ db: db.db, logger, queue }, actorOf(req), merchantOrderNo, jobId, body.reason);
      return `Job ${jobId} sent back to the queue with a fresh retry budget; its failure stays on the timeline.`;
    });
  });
};
