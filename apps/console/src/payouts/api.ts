import { actingMerchant, readingMerchant } from '../operators/scope.ts';
import type { FastifyReply } from 'fastify';
import { targetOfBody } from '../orders/api.ts';
import { withMerchant } from '../orders/queries.ts';
import { actorOf } from '../operators/operator.ts';
import { errorBodySchema } from '../web/api-schemas.ts';
import type { RouteDeps } from '../web/route-deps.ts';
import { route, type RouteRow } from '../web/route-table.ts';
import { registerPayout } from './actions.ts';
import { payoutValidation, type PayoutCatalog } from './queries.ts';
import {
  payoutBodySchema,
  payoutOrderViewSchema,
  payoutValidateBodySchema,
  validateResponseSchema,
} from './schemas.ts';

/** The catalog, saying the age of each copy it serves in the response's headers (also on a 422 that follows). */
function withAgeHeaders(catalog: PayoutCatalog, reply: FastifyReply): PayoutCatalog {
  return {
    get: async (options) => {
      const view = await catalog.get(options);
      reply.header('x-catalog-age-seconds', String(view.ageSeconds));
      if (view.stale) reply.header('x-catalog-stale', 'true');
      return view;
    },
  };
}

const errorResponses = {
  400: errorBodySchema,
  422: errorBodySchema.describe('Every problem, each naming its field'),
  502: errorBodySchema.describe('The platform answered with an error code (platformCode, platformMessage)'),
  503: errorBodySchema.describe('The platform is down and no catalog is stored'),
};

/** Payout registration (validated against the catalog) and validation alone. */
export function payoutsRows({ db, logger, merchants }: RouteDeps): RouteRow[] {
  return [
    route({
      method: 'POST',
      url: '/api/payouts',
      action: 'orders.register',
      target: targetOfBody,
      schema: {
        summary: 'Register a payout, validated against the catalog',
        description:
          'Idempotent like pay-ins. On success the order carries `apiParams`, the create-payout parameters ' +
          'keyed by apiParam. A repeat of a registered body answers 200 without consulting the catalog. ' +
          'Needs the role operator and a `reason`, or the role service (no reason). `merchant` (a ref) names ' +
          'whose order it is and whose catalog it is checked against: required when the console serves two or ' +
          'more merchants.',
        tags: ['orders'],
        body: payoutBodySchema,
        response: {
          200: payoutOrderViewSchema,
          201: payoutOrderViewSchema,
          403: errorBodySchema,
          409: errorBodySchema,
          ...errorResponses,
        },
      },
      handler: async (req, reply) => {
        const merchant = actingMerchant(req.operator!, merchants, req.body.merchant);
        const payoutDeps = {
          db: db.db,
          logger,
          merchantNo: merchant.merchant.merchantNo,
          ...(merchants.several ? { namedMerchant: merchant.merchant.ref } : {}),
          catalog: withAgeHeaders(merchant.catalog, reply),
        };
        const { created, order } = await registerPayout(payoutDeps, actorOf(req), req.body);
        return reply.code(created ? 201 : 200).send(withMerchant(order, merchants, merchant));
      },
    }),

    route({
      method: 'POST',
      url: '/api/payouts/validate',
      action: 'read',
      schema: {
        summary: 'Validate a payout against the catalog without registering it',
        description: '`merchant` (a ref) names whose catalog: required when the console serves two or more merchants.',
        tags: ['orders'],
        body: payoutValidateBodySchema,
        response: { 200: validateResponseSchema, ...errorResponses },
      },
      handler: async (req, reply) =>
        payoutValidation(
          withAgeHeaders(readingMerchant(req.operator!, merchants, req.body.merchant).catalog, reply),
          req.body,
        ),
    }),
  ];
}
