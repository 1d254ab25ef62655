import type { CatalogView } from '@mcb/core/catalog';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { refreshCatalog } from './actions.ts';
import { catalogResponseSchema } from './schemas.ts';
import { currencySchema } from '../orders/schemas.ts';
import { errorBodySchema, reasonSchema } from '../web/api-schemas.ts';
import type { RouteDeps } from '../web/route-deps.ts';
import { route, type RouteRow } from '../web/route-table.ts';

/** The catalog as served: the platform's `currencies` plus when it was fetched; `Age` says the same in HTTP. */
export function sendCatalog(reply: FastifyReply, view: CatalogView) {
  reply.header('age', String(view.ageSeconds));
  if (view.stale) reply.header('x-catalog-stale', 'true');
  return {
    currencies: view.catalog.currencies,
    fetchedAt: view.fetchedAt.toISOString(),
    ageSeconds: view.ageSeconds,
    stale: view.stale,
  };
}

const querystring = z.strictObject({ currency: currencySchema.optional() });
const responses = {
  200: catalogResponseSchema,
  400: errorBodySchema,
  422: errorBodySchema.describe(
    'CURRENCY_NOT_ENABLED: the currency is not enabled for this merchant (platformCode 40017 when the ' +
      'platform said so)',
  ),
  502: errorBodySchema.describe(
    'MERCHANT_UNKNOWN (platform code 40010) or another platform error code (platformCode, platformMessage)',
  ),
  503: errorBodySchema.describe('The platform is down and no catalog is stored'),
  504: errorBodySchema,
};

/** The payment-method catalog, from the cache (served stale with its age when the platform is down). */
export function paymentMethodsRows({ catalog, db, logger }: RouteDeps): RouteRow[] {
  const deps = { db: db.db, logger, catalog };
  return [
    route({
      method: 'GET',
      url: '/api/payment-methods',
      action: 'read',
      schema: {
        summary: 'The payment-method catalog',
        description:
          'As the platform returned it, narrowed to `currency` when given. When the platform is down the ' +
          'last good copy is served with `stale: true` and its age.',
        tags: ['catalog'],
        querystring,
        response: responses,
      },
      handler: async (req, reply) => sendCatalog(reply, await catalog.get({ currency: req.query.currency })),
    }),

    route({
      method: 'POST',
      url: '/api/payment-methods/refresh',
      action: 'catalog.refresh',
      target: () => 'catalog',
      schema: {
        summary: 'Fetch the catalog from the platform now',
        description:
          'An action (role operator, a reason, an audit row): it asks the platform and stores a new ' +
          'snapshot. No fallback: a platform failure is reported as such.',
        tags: ['catalog'],
        querystring,
        body: z.strictObject({ reason: reasonSchema.optional() }).optional(),
        response: { ...responses, 403: errorBodySchema.describe('FORBIDDEN: a viewer') },
      },
      handler: async (req, reply) => {
        const view = await refreshCatalog(deps, actorOf(req), {
          currency: req.query.currency,
          reason: req.body?.reason,
        });
        return sendCatalog(reply, view);
      },
    }),
  ];
}
