import { AppError, ErrorCodes } from '@mcb/core/errors';
import { normalizeDecimal } from '@mcb/core/money';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { findOrder, insertOrderIfAbsent, orderView } from '../orders/repo.ts';
import { registrationHash } from '../orders/request-hash.ts';
import { callbackTimeline, timelineEntrySchema } from '../orders/timeline.ts';
import { errorBodySchema, merchantOrderNoSchema, orderViewSchema, payinBodySchema } from '../schemas.ts';
import type { RouteDeps } from './deps.ts';

/** The 409 every registration gives for a number already registered with another body. */
export function orderConflict(merchantOrderNo: string): AppError {
  return new AppError(
    ErrorCodes.ORDER_CONFLICT,
    `order ${merchantOrderNo} is already registered with a different body; use a new merchantOrderNo`,
    { details: { merchantOrderNo } },
  );
}

/** Pay-in registration and the order view. */
export const ordersRoutes: FastifyPluginAsyncZod<RouteDeps> = async (app, { db, queue }) => {
  app.post(
    '/api/payins',
    {
      schema: {
        summary: 'Register a pay-in',
        description: 'Idempotent: the same body again answers 200 with the order; a different body for the same number answers 409.',
        tags: ['orders'],
        body: payinBodySchema,
        response: { 200: orderViewSchema, 201: orderViewSchema, 400: errorBodySchema, 409: errorBodySchema },
      },
    },
    async (req, reply) => {
      const body = req.body;
      const requestHash = registrationHash({ kind: 'payin', ...body });
      const created = await insertOrderIfAbsent(db, {
        merchantOrderNo: body.merchantOrderNo,
        kind: 'payin',
        currency: body.currency,
        amount: normalizeDecimal(body.amount),
        customerId: body.customerId ?? null,
        requestHash,
      });
      if (created) {
        req.log.info({ merchantOrderNo: created.merchantOrderNo, kind: 'payin' }, 'order registered');
        return reply.code(201).send(await orderView(db, created));
      }
      const existing = await findOrder(db, body.merchantOrderNo);
      if (!existing || existing.requestHash !== requestHash) throw orderConflict(body.merchantOrderNo);
      return reply.code(200).send(await orderView(db, existing));
    },
  );

  app.get(
    '/api/orders/:merchantOrderNo',
    {
      schema: {
        summary: 'An order with its ledger, open review and callback timeline',
        tags: ['orders'],
        params: z.object({ merchantOrderNo: merchantOrderNoSchema }),
        response: {
          200: orderViewSchema.extend({ timeline: z.array(timelineEntrySchema).describe('Its callbacks, job attempts, receipt, ledger and reviews, oldest first') }),
          404: errorBodySchema,
        },
      },
    },
    async (req) => {
      const order = await findOrder(db, req.params.merchantOrderNo);
      if (!order) {
        throw new AppError(ErrorCodes.NOT_FOUND, `no order ${req.params.merchantOrderNo}`, {
          details: { merchantOrderNo: req.params.merchantOrderNo },
        });
      }
      const [view, timeline] = await Promise.all([orderView(db, order), callbackTimeline(db.db, queue, { merchantOrderNo: order.merchantOrderNo })]);
      return { ...view, timeline };
    },
  );
};
