import { validatePayout, type CatalogCache, type CatalogView } from '@mcb/core/catalog';
import type { Database, Order } from '@mcb/core/db';
import { findOrder } from '@mcb/settlement';
import { AppError, ErrorCodes, isAppError } from '@mcb/core/errors';
import { normalizeDecimal } from '@mcb/core/money';
import type { FastifyReply } from 'fastify';
import { authorize, recordFailure } from '../audit/perform.ts';
import { orderTarget, registerOrder } from '../orders/actions.ts';
import { targetOfBody } from '../orders/api.ts';
import { actorOf } from '../operators/operator.ts';
import { orderView } from '../orders/repo.ts';
import { registrationHash } from '../orders/request-hash.ts';
import { errorBodySchema } from '../web/api-schemas.ts';
import {
  payoutBodySchema,
  payoutOrderViewSchema,
  payoutValidateBodySchema,
  validateResponseSchema,
  type PayoutBody,
} from './schemas.ts';
import type { RouteDeps } from '../web/route-deps.ts';
import { route, type RouteRow } from '../web/route-table.ts';

type Validated = { apiParams: Record<string, string>; view: CatalogView };

/** Validate against the catalog for the payout's currency; 422 with every problem, or the apiParams. */
async function validateAgainstCatalog(
  catalog: CatalogCache,
  body: Omit<PayoutBody, 'merchantOrderNo'>,
  reply: FastifyReply,
): Promise<Validated> {
  const view = await catalog.get({ currency: body.currency }).catch((e: unknown) => {
    // For a payout, a currency not enabled is one more validation problem of the body, in the same shape.
    if (!isAppError(e) || e.code !== ErrorCodes.CURRENCY_NOT_ENABLED) throw e;
    throw new AppError(ErrorCodes.PAYOUT_INVALID, 'the payout does not satisfy the catalog (1 problem)', {
      cause: e,
      details: { errors: [{ field: 'currency', message: e.message }], ...e.details },
    });
  });
  reply.header('x-catalog-age-seconds', String(view.ageSeconds));
  if (view.stale) reply.header('x-catalog-stale', 'true');
  const result = validatePayout(view.catalog, body);
  if (!result.ok) {
    throw new AppError(
      ErrorCodes.PAYOUT_INVALID,
      `the payout does not satisfy the catalog (${result.errors.length} problem${result.errors.length === 1 ? '' : 's'})`,
      {
        details: { errors: result.errors },
      },
    );
  }
  return { apiParams: result.apiParams, view };
}

async function payoutView(db: Database, order: Order) {
  return {
    ...(await orderView(db, order)),
    paymentMethod: order.paymentMethod ?? 0,
    apiParams: order.payoutParams ?? {},
  };
}

const errorResponses = {
  400: errorBodySchema,
  422: errorBodySchema.describe('Every problem, each naming its field'),
  502: errorBodySchema.describe('The platform answered with an error code (platformCode, platformMessage)'),
  503: errorBodySchema.describe('The platform is down and no catalog is stored'),
};

/** Payout registration (validated against the catalog) and validation alone. */
export function payoutsRows({ db, catalog, logger }: RouteDeps): RouteRow[] {
  const deps = { db: db.db, logger };
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
          'Needs the role operator and a `reason`, or the role service (no reason).',
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
        const { reason, ...body } = req.body;
        const auth = await authorize(deps, actorOf(req), {
          action: 'orders.register',
          target: orderTarget(body.merchantOrderNo),
          reason,
        });
        const requestHash = registrationHash({ kind: 'payout', ...body });
        // A retry of a registered payout must not depend on the catalog still being reachable or unchanged.
        let apiParams: Record<string, string> | undefined;
        if (!(await findOrder(db.db, body.merchantOrderNo))) {
          try {
            ({ apiParams } = await validateAgainstCatalog(catalog, body, reply));
          } catch (e) {
            await recordFailure(deps, auth, e);
            throw e;
          }
        }
        const { created, order } = await registerOrder(deps, auth, {
          merchantOrderNo: body.merchantOrderNo,
          kind: 'payout',
          currency: body.currency,
          amount: normalizeDecimal(body.amount),
          customerId: body.customerId ?? null,
          paymentMethod: body.paymentMethod,
          // Only a new order is inserted; an existing one keeps its own parameters (and must have the same hash).
          payoutParams: apiParams ?? {},
          requestHash,
        });
        return reply.code(created ? 201 : 200).send(await payoutView(db.db, order));
      },
    }),

    route({
      method: 'POST',
      url: '/api/payouts/validate',
      action: 'read',
      schema: {
        summary: 'Validate a payout against the catalog without registering it',
        tags: ['orders'],
        body: payoutValidateBodySchema,
        response: { 200: validateResponseSchema, ...errorResponses },
      },
      handler: async (req, reply) => {
        const { apiParams, view } = await validateAgainstCatalog(catalog, req.body, reply);
        return {
          ok: true as const,
          apiParams,
          catalog: { fetchedAt: view.fetchedAt.toISOString(), ageSeconds: view.ageSeconds, stale: view.stale },
        };
      },
    }),
  ];
}
