import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { orderTarget, registerPayin, replayJob } from './actions.ts';
import { orderDetail, orderDetailSchema } from './queries.ts';
import { actorOf } from '../operators/operator.ts';
import { errorBodySchema, reasonSchema } from '../web/api-schemas.ts';
import { merchantOrderNoSchema, orderViewSchema, payinBodySchema } from './schemas.ts';
import type { RouteDeps } from '../web/route-deps.ts';
import { route, type RouteRow } from '../web/route-table.ts';

export { orderConflict } from './actions.ts';

/** The order and one of its jobs, in a path. */
export const jobParams = z.object({ merchantOrderNo: merchantOrderNoSchema, jobId: z.string().min(1).max(200) });

/** The audit target of a registration, from the request as sent (for a refusal before validation). */
export const targetOfBody = (req: FastifyRequest): string =>
  orderTarget(String((req.body as { merchantOrderNo?: unknown } | undefined)?.merchantOrderNo ?? ''));

/** The audit target of a job's replay, from the request as sent (for a refusal before validation). */
export const jobTarget = (queueName: string, req: FastifyRequest): string =>
  `job:${queueName}/${String((req.params as { jobId?: unknown } | undefined)?.jobId ?? '')}`;

/** Pay-in registration and the order view. */
export function ordersRows({ db, queue, logger, merchantNo }: RouteDeps): RouteRow[] {
  const deps = { db: db.db, logger, merchantNo };
  return [
    route({
      method: 'POST',
      url: '/api/payins',
      action: 'orders.register',
      target: targetOfBody,
      schema: {
        summary: 'Register a pay-in',
        description:
          'Idempotent: the same body again answers 200 with the order; a different body for the same ' +
          'number answers 409. Needs the role operator and a `reason` (not part of what makes two ' +
          'registrations the same), or the role service (no reason).',
        tags: ['orders'],
        body: payinBodySchema,
        response: {
          200: orderViewSchema,
          201: orderViewSchema,
          400: errorBodySchema,
          403: errorBodySchema,
          409: errorBodySchema,
        },
      },
      handler: async (req, reply) => {
        const { created, order } = await registerPayin(deps, actorOf(req), req.body);
        return reply.code(created ? 201 : 200).send(order);
      },
    }),

    route({
      method: 'GET',
      url: '/api/orders/:merchantOrderNo',
      action: 'read',
      schema: {
        summary: 'An order with its ledger, open review and callback timeline',
        tags: ['orders'],
        params: z.object({ merchantOrderNo: merchantOrderNoSchema }),
        response: { 200: orderDetailSchema, 404: errorBodySchema },
      },
      handler: async (req) => orderDetail(db.db, queue, { merchantNo, merchantOrderNo: req.params.merchantOrderNo }),
    }),

    // "Replay this job" (actions.ts has the rules): only where the console has the queue.
    ...(queue
      ? [
          route({
            method: 'POST',
            url: '/api/orders/:merchantOrderNo/jobs/:jobId/replay',
            action: 'queue.retry',
            target: (req) => jobTarget(queue.name, req),
            schema: {
              summary: 'Replay one failed job of the order',
              description:
                'Sends the job, failed for good, back to the queue with a fresh retry budget (the attempt ' +
                'count reset). Role operator; `reason` required; audited as `queue.retry` (details `via: ' +
                'order-page`). 409 JOB_NOT_FAILED when the job is not failed.',
              tags: ['orders'],
              params: jobParams,
              body: z.strictObject({ reason: reasonSchema.optional() }).optional(),
              response: {
                200: z.object({
                  jobId: z.string(),
                  attemptsBefore: z.number().int().describe('Attempts the job had used before the replay'),
                }),
                400: errorBodySchema,
                403: errorBodySchema,
                404: errorBodySchema,
                409: errorBodySchema,
              },
            },
            handler: async (req) =>
              replayJob(
                { db: db.db, logger, queue },
                actorOf(req),
                req.params.merchantOrderNo,
                req.params.jobId,
                req.body?.reason,
              ),
          }),
        ]
      : []),
  ];
}
