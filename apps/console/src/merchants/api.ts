/** `GET /api/merchants` and `GET /api/merchants/:ref/minutes`: the merchants page's figures, as JSON. */
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Merchant } from '@mcb/core/config';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { errorBodySchema } from '../web/api-schemas.ts';
import { route, type RouteRow } from '../web/route-table.ts';
import { visibleMerchants, type MerchantsDeps } from './deps.ts';
import { readMinutes, rollupBehind, rollupMinutes } from './minutes.ts';
import { merchantFigures, merchantsListSchema } from './queries.ts';

const minutesSchema = z.object({
  ref: z.string(),
  merchantNo: z.string(),
  minutes: z.array(
    z.object({
      minute: z.string(),
      received: z.number().int(),
      credited: z.number().int(),
      failed: z.number().int(),
      creditP99Ms: z.number().int().nullable(),
    }),
  ),
});

export function merchantsRows(deps: MerchantsDeps): RouteRow[] {
  return [
    route({
      method: 'GET',
      url: '/api/merchants',
      action: 'read',
      schema: {
        summary: "Each merchant's figures: paused, queue, credits, callback-to-credit and Get order",
        description:
          'Per merchant: ref, number, weight, its pause (by, reason, since) or null, its queue (waiting, delayed, ' +
          'failed, in flight, oldest waiting), credits in the last minute and hour, callback-to-credit p99 (1 h), ' +
          "and the live workers' Get order p99, error rate, breaker, budget and use; `attention` says why a person " +
          'should look. A figure that cannot be known is null. See docs/merchants.md.',
        tags: ['merchants'],
        response: { 200: merchantsListSchema },
      },
      handler: async (req) => ({ merchants: await merchantFigures(deps, visibleMerchants(deps, req)) }),
    }),
    route({
      method: 'GET',
      url: '/api/merchants/:ref/minutes',
      action: 'read',
      schema: {
        summary: "A merchant's callbacks per minute over the last 24 hours (the merchant page's picture)",
        description:
          'One entry per minute, oldest first, the open minute last (computed live): received, credited, failed ' +
          'for good, and callback-to-credit p99 in ms (null: nothing credited). A minute without traffic is zeros.',
        tags: ['merchants'],
        params: z.object({ ref: z.string().max(64) }),
        response: { 200: minutesSchema, 404: errorBodySchema },
      },
      handler: async (req) => {
        const merchant = merchantOf(deps, req, req.params.ref);
        return { ref: merchant.ref, merchantNo: merchant.merchantNo, minutes: await pictureOf(deps, merchant) };
      },
    }),
  ];
}

/** The merchant `ref` names among those `req` may see; 404 otherwise (as for one that does not exist). */
export function merchantOf(deps: MerchantsDeps, req: FastifyRequest, ref: string): Merchant {
  const found = visibleMerchants(deps, req).find((m) => m.ref === ref);
  if (!found) throw new AppError(ErrorCodes.NOT_FOUND, `no merchant "${ref.slice(0, 40)}"`);
  return found;
}

/** The merchant's 24 hours, rolled up first when the console's timer is behind. */
export async function pictureOf(deps: MerchantsDeps, merchant: Merchant) {
  const now = new Date(deps.now?.() ?? Date.now());
  if (await rollupBehind(deps.db, merchant.merchantNo, now))
    await rollupMinutes(
      deps.db,
      deps.merchants.map((m) => m.merchantNo),
      now,
    );
  return readMinutes(deps.db, merchant.merchantNo, now);
}
