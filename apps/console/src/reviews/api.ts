import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { listScopeOf } from '../operators/scope.ts';
import { errorBodySchema, reasonSchema } from '../web/api-schemas.ts';
import { dismiss, reverify, type ReviewActionDeps } from './actions.ts';
import { listReviews, reviewFilterSchema, reviewListSchema, reviewViewSchema } from './queries.ts';
import { route, type RouteRow } from '../web/route-table.ts';

/** The audit target of a review action, from the request as sent (for a refusal before validation). */
export const reviewTarget = (req: FastifyRequest): string =>
  `review:${String((req.params as { id?: unknown }).id ?? '')}`;

const idParams = z.object({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) });

/**
 * Reviews: events that failed verification. List them with their reasons; re-verify one now, or dismiss it with a
 * note. The rules (role, reason, audit) live in actions.ts; these routes only call it.
 */
export function reviewsRows(deps: ReviewActionDeps): RouteRow[] {
  return [
    route({
      method: 'GET',
      url: '/api/reviews',
      action: 'read',
      schema: {
        summary: 'Reviews, newest first',
        description:
          'Events that failed verification, with reasons. Page with `before` (the `nextBefore` of the previous page).',
        tags: ['reviews'],
        querystring: reviewFilterSchema,
        response: { 200: reviewListSchema, 400: errorBodySchema },
      },
      handler: async (req) => {
        const scope = listScopeOf(req.operator!, deps.merchants, req.query.merchant);
        return listReviews(deps.db, req.query, req.operator!.role, scope.merchantNos, scope.refOf);
      },
    }),

    route({
      method: 'POST',
      url: '/api/reviews/:id/reverify',
      action: 'reviews.reverify',
      target: reviewTarget,
      schema: {
        summary: 'Re-verify a review now',
        description:
          'Runs the event through the worker\'s applyEvent (source "review", no waiting): Get order is ' +
          'asked now; if it confirms, the order is credited or finalised once and the review is resolved ' +
          'in the same transaction. Otherwise the review stays open with the new reason. Role operator; ' +
          '`reason` required.',
        tags: ['reviews'],
        params: idParams,
        body: z.strictObject({ reason: reasonSchema.optional() }).optional(),
        response: {
          200: z.object({
            outcome: z
              .enum(['applied', 'duplicate', 'review'])
              .describe('applied: credited/finalised now; duplicate: applied before; review: still failing'),
            review: reviewViewSchema,
          }),
          400: errorBodySchema,
          403: errorBodySchema,
          404: errorBodySchema,
          409: errorBodySchema.describe('The review is not open'),
          503: errorBodySchema.describe('The platform or the database is unreachable; nothing changed'),
        },
      },
      handler: async (req) => reverify(deps, actorOf(req), req.params.id, req.body?.reason),
    }),

    route({
      method: 'POST',
      url: '/api/reviews/:id/dismiss',
      action: 'reviews.dismiss',
      target: reviewTarget,
      schema: {
        summary: 'Dismiss a review with a note',
        description:
          'Closes an open review without applying its event (for example a forged callback). `reason` is ' +
          'required (the audit trail); `note` is kept on the review (the reason when omitted). Role ' +
          'operator.',
        tags: ['reviews'],
        params: idParams,
        body: z.strictObject({ reason: reasonSchema.optional(), note: z.string().max(2000).optional() }).optional(),
        response: {
          200: z.object({ review: reviewViewSchema }),
          400: errorBodySchema,
          403: errorBodySchema,
          404: errorBodySchema,
          409: errorBodySchema,
        },
      },
      handler: async (req) => ({
        review: await dismiss(deps, actorOf(req), req.params.id, req.body?.reason, req.body?.note),
      }),
    }),
  ];
}
