import type { CatalogView } from '@mcb/core/catalog';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { readingMerchant } from '../operators/scope.ts';
import { refreshCatalog } from './actions.ts';
import { catalogResponseSchema } from './schemas.ts';
import { currencySchema, merchantRefSchema } from '../orders/schemas.ts';
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

const querystring = z.strictObject({ currency: currencySchema.optional(), merchant: merchantRefSchema.optional() });
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

/** The audit target of a refresh: `catalog`, or `catalog:{ref}` when the console serves several merchants. */
const catalogTarget = (ref: unknown, several: boolean) =>
  several && typeof ref === 'string' && ref ? `catalog:${ref.slice(0, 64)}` : 'catalog';

/** The payment-method catalog, from the cache (served stale with its age when the platform is down). */
export function paymentMethodsRows({ merchants, db, logger }: RouteDeps): RouteRow[] {
  /** The catalog of the merchant `?merchant=` names (or the only one's): each merchant's is its own. */
  const catalogOf = (ref: string | undefined) => merchants.of(ref);
  return [
    route({
      method: 'GET',
      url: '/api/payment-methods',
      action: 'read',
      schema: {
        summary: 'The payment-method catalog',
        description:
          'As the platform returned it, narrowed to `currency` when given. When the platform is down the ' +
          'last good copy is served with `stale: true` and its age. `?merchant=` (a ref) names whose catalog: ' +
          'required when the console serves two or more merchants.',
        tags: ['catalog'],
        querystring,
        response: responses,
      },
      handler: async (req, reply) =>
        sendCatalog(
          reply,
          await readingMerchant(req.operator!, merchants, req.query.merchant).catalog.get({
            currency: req.query.currency,
          }),
        ),
    }),

    route({
      method: 'POST',
      url: '/api/payment-methods/refresh',
      action: 'catalog.refresh',
      target: (req) => catalogTarget((req.query as { merchant?: unknown }).merchant, merchants.several),
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
        const { catalog, merchant } = catalogOf(req.query.merchant);
        const view = await refreshCatalog({ db: db.db, logger, catalog }, actorOf(req), {
          merchant: merchant.merchantNo,
          currency: req.query.currency,
          reason: req.body?.reason,
          target: catalogTarget(req.query.merchant, merchants.several),
        });
        return sendCatalog(reply, view);
      },
    }),
  ];
}
