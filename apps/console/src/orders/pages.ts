import type { Db } from '@mcb/core/db';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { listReviews } from '../reviews/queries.ts';
import { merchantOrderNoSchema } from './schemas.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { orderDetail } from './queries.ts';
import { orderPage } from './views.ts';

/** `/orders/{merchantOrderNo}`: the same query as `GET /api/orders/{no}`, as a page. */
export const ordersPages: FastifyPluginAsync<{ db: Db; queue?: Queue }> = async (app, { db, queue }) => {
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
};
