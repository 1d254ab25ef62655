import { normalizeDecimal } from '@mcb/core/money';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authorize } from '../audit/perform.ts';
import { orderTarget, registerOrder } from './actions.ts';
import { orderDetail, orderDetailSchema } from './queries.ts';
import { orderView } from './repo.ts';
import { actorOf } from '../operators/operator.ts';
import { registrationHash } from './request-hash.ts';
import { errorBodySchema } from '../web/api-schemas.ts';
import { merchantOrderNoSchema, orderViewSchema, payinBodySchema } from './schemas.ts';
import type { RouteDeps } from '../web/route-deps.ts';

export { orderConflict } from './actions.ts';

/** Pay-in registration and the order view. */
export const ordersRoutes: FastifyPluginAsyncZod<RouteDeps> = async (app, { db, queue, logger }) => {
  const deps = { db: db.db, logger };
  app.post(
    '/api/payins',
    {
      schema: {
        summary: 'Register a pay-in',
        description:
          'Idempotent: the same body again answers 200 with the order; a different body for the same number answers 409. Needs the role operator and a `reason` (not part of what makes two registrations the same), or the role service (no reason).',
        tags: ['orders'],
        body: payinBodySchema,
        response: { 200: orderViewSchema, 201: orderViewSchema, 400: errorBodySchema, 403: errorBodySchema, 409: errorBodySchema },
      },
    },
    async (req, reply) => {
      const { reason, ...body } = req.body;
      const auth = await authorize(deps, actorOf(req), { action: 'orders.register', target: orderTarget(body.merchantOrderNo), reason });
      const { created, order } = await registerOrder(deps, auth, {
        merchantOrderNo: body.merchantOrderNo,
        kind: 'payin',
        currency: body.currency,
        amount: normalizeDecimal(body.amount),
        customerId: body.customerId ?? null,
        requestHash: registrationHash({ kind: 'payin', ...body }),
      });
      return reply.code(created ? 201 : 200).send(await orderView(db, order));
    },
  );

  app.get(
    '/api/orders/:merchantOrderNo',
    {
      schema: {
        summary: 'An order with its ledger, open review and callback timeline',
        tags: ['orders'],
        params: z.object({ merchantOrderNo: merchantOrderNoSchema }),
        response: { 200: orderDetailSchema, 404: errorBodySchema },
      },
    },
    async (req) => orderDetail(db, queue, req.params.merchantOrderNo),
  );
};
