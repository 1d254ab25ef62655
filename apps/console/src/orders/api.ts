import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { orderTarget, registerPayin, replayJob } from './actions.ts';
import { merchantRequired, orderDetail, orderDetailSchema, orderMerchantOf, withMerchant } from './queries.ts';
import type { Database } from '@mcb/core/db';
import { ErrorCodes, isAppError } from '@mcb/core/errors';
import { actorOf, type Operator } from '../operators/operator.ts';
import { actingMerchant } from '../operators/scope.ts';
import { errorBodySchema, reasonSchema } from '../web/api-schemas.ts';
import { merchantOrderNoSchema, merchantRefSchema, orderViewSchema, payinBodySchema } from './schemas.ts';
import type { ConsoleMerchants, RouteDeps } from '../web/route-deps.ts';
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

/** The registration's dependencies for the merchant a body names (or the only one). */
function registrationOf({ db, logger, merchants }: Pick<RouteDeps, 'db' | 'logger' | 'merchants'>) {
  return (operator: Operator, ref: string | undefined) => {
    // Scope is the action layer's to check (403 with its audit row); a service scoped to one merchant may omit it.
    const merchant = actingMerchant(operator, merchants, ref);
    const named = merchants.several ? { namedMerchant: merchant.merchant.ref } : {};
    return { merchant, deps: { db: db.db, logger, merchantNo: merchant.merchant.merchantNo, ...named } };
  };
}

const orderQuery = z.object({ merchant: merchantRefSchema.optional() });

/** The number of the merchant whose order it is, over every merchant (null: no merchant holds it). */
export async function ownerOf(
  db: Database,
  merchants: ConsoleMerchants,
  merchantOrderNo: string,
  query: unknown,
): Promise<string | null> {
  try {
    const found = await orderMerchantOf(db, merchants, merchantOrderNo, orderQuery.parse(query).merchant);
    if ('candidates' in found) throw merchantRequired(merchantOrderNo, found.candidates);
    return found.merchant.merchant.merchantNo;
  } catch (e) {
    if (isAppError(e, ErrorCodes.NOT_FOUND)) return null;
    throw e;
  }
}

/**
 * "Replay this job" from the API: the order's merchant (over every merchant: one outside the operator's scope is the
 * action layer's 403 with its audit row), and its queue.
 */
async function replayJobOfOrder(
  { db, logger, queue, queueOf, merchants }: Pick<RouteDeps, 'db' | 'logger' | 'queue' | 'queueOf' | 'merchants'>,
  req: FastifyRequest,
  params: { merchantOrderNo: string; jobId: string },
  reason: unknown,
) {
  const merchantNo = await ownerOf(db.db, merchants, params.merchantOrderNo, req.query);
  const own = (merchantNo !== null ? queueOf?.(merchantNo) : undefined) ?? queue!;
  return replayJob(
    { db: db.db, logger, queue: own, merchantNo },
    actorOf(req),
    params.merchantOrderNo,
    params.jobId,
    reason,
  );
}

/** Pay-in registration and the order view. */
export function ordersRows({ db, queue, queueOf, logger, merchants }: RouteDeps): RouteRow[] {
  const deps = registrationOf({ db, logger, merchants });
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
          'registrations the same), or the role service (no reason). `merchant` (a ref) names whose order it ' +
          'is: required when the console serves two or more merchants (400 naming it otherwise).',
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
        const { merchant, deps: registration } = deps(req.operator!, req.body.merchant);
        const { created, order } = await registerPayin(registration, actorOf(req), req.body);
        return reply.code(created ? 201 : 200).send(withMerchant(order, merchants, merchant));
      },
    }),

    route({
      method: 'GET',
      url: '/api/orders/:merchantOrderNo',
      action: 'read',
      schema: {
        summary: 'An order with its ledger, open review and callback timeline',
        description:
          '`?merchant=` (a ref) names whose order; with two or more merchants and none named, the one merchant ' +
          'holding the number, or 409 MERCHANT_REQUIRED (`details.merchants`: the refs holding it).',
        tags: ['orders'],
        params: z.object({ merchantOrderNo: merchantOrderNoSchema }),
        response: { 200: orderDetailSchema, 400: errorBodySchema, 404: errorBodySchema, 409: errorBodySchema },
      },
      handler: async (req) => {
        const { merchantOrderNo } = req.params;
        // `?merchant=` is read here rather than declared (the path parameter stays the operation's first).
        const { merchant } = orderQuery.parse(req.query);
        const found = await orderMerchantOf(db.db, merchants, merchantOrderNo, merchant, req.operator);
        if ('candidates' in found) throw merchantRequired(merchantOrderNo, found.candidates);
        const key = { merchantNo: found.merchant.merchant.merchantNo, merchantOrderNo };
        const own = queueOf?.(key.merchantNo) ?? queue;
        return withMerchant(await orderDetail(db.db, own, key, merchants.several), merchants, found.merchant);
      },
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
              replayJobOfOrder({ db, logger, queue, queueOf, merchants }, req, req.params, req.body?.reason),
          }),
        ]
      : []),
  ];
}
