import { validatePayout, type CatalogCache, type CatalogView } from '@mcb/core/catalog';
import type { Db, Order } from '@mcb/core/db';
import { AppError, ErrorCodes, isAppError } from '@mcb/core/errors';
import { normalizeDecimal } from '@mcb/core/money';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { findOrder, insertOrderIfAbsent, orderView } from '../orders/repo.ts';
import { registrationHash } from '../orders/request-hash.ts';
import {
  errorBodySchema,
  payoutBodySchema,
  payoutOrderViewSchema,
  payoutValidateBodySchema,
  validateResponseSchema,
  type PayoutBody,
} from '../schemas.ts';
import type { RouteDeps } from './deps.ts';
import { orderConflict } from './orders.ts';

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
    throw new AppError(ErrorCodes.PAYOUT_INVALID, `the payout does not satisfy the catalog (${result.errors.length} problem${result.errors.length === 1 ? '' : 's'})`, {
      details: { errors: result.errors },
    });
  }
  return { apiParams: result.apiParams, view };
}

async function payoutView(db: Db, order: Order) {
  return { ...(await orderView(db, order)), paymentMethod: order.paymentMethod ?? 0, apiParams: order.payoutParams ?? {} };
}

const errorResponses = {
  400: errorBodySchema,
  422: errorBodySchema.describe('Every problem, each naming its field'),
  502: errorBodySchema.describe('The platform answered with an error code (platformCode, platformMessage)'),
  503: errorBodySchema.describe('The platform is down and no catalog is stored'),
};

/** Payout registration (validated against the catalog) and validation alone. */
export const payoutsRoutes: FastifyPluginAsyncZod<RouteDeps> = async (app, { db, catalog }) => {
  app.post(
    '/api/payouts',
    {
      schema: {
        summary: 'Register a payout, validated against the catalog',
        description:
          'Idempotent like pay-ins. On success the order carries `apiParams`, the create-payout parameters keyed by apiParam. A repeat of a registered body answers 200 without consulting the catalog.',
        tags: ['orders'],
        body: payoutBodySchema,
        response: { 200: payoutOrderViewSchema, 201: payoutOrderViewSchema, 409: errorBodySchema, ...errorResponses },
      },
    },
    async (req, reply) => {
      const body = req.body;
      const requestHash = registrationHash({ kind: 'payout', ...body });
      // A retry of a registered payout must not depend on the catalog still being reachable or unchanged.
      const existing = await findOrder(db, body.merchantOrderNo);
      if (existing) {
        if (existing.requestHash !== requestHash) throw orderConflict(body.merchantOrderNo);
        return reply.code(200).send(await payoutView(db, existing));
      }
      const { apiParams } = await validateAgainstCatalog(catalog, body, reply);
      const created = await insertOrderIfAbsent(db, {
        merchantOrderNo: body.merchantOrderNo,
        kind: 'payout',
        currency: body.currency,
        amount: normalizeDecimal(body.amount),
        customerId: body.customerId ?? null,
        paymentMethod: body.paymentMethod,
        payoutParams: apiParams,
        requestHash,
      });
      if (created) {
        req.log.info({ merchantOrderNo: created.merchantOrderNo, kind: 'payout', paymentMethod: body.paymentMethod }, 'order registered');
        return reply.code(201).send(await payoutView(db, created));
      }
      // Lost a race with a concurrent registration of the same number.
      const winner = await findOrder(db, body.merchantOrderNo);
      if (!winner || winner.requestHash !== requestHash) throw orderConflict(body.merchantOrderNo);
      return reply.code(200).send(await payoutView(db, winner));
    },
  );

  app.post(
    '/api/payouts/validate',
    {
      schema: {
        summary: 'Validate a payout against the catalog without registering it',
        tags: ['orders'],
        body: payoutValidateBodySchema,
        response: { 200: validateResponseSchema, ...errorResponses },
      },
    },
    async (req, reply) => {
      const { apiParams, view } = await validateAgainstCatalog(catalog, req.body, reply);
      return {
        ok: true as const,
        apiParams,
        catalog: { fetchedAt: view.fetchedAt.toISOString(), ageSeconds: view.ageSeconds, stale: view.stale },
      };
    },
  );
};
