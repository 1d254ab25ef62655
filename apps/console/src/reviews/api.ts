import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { errorBodySchema, reasonSchema } from '../web/api-schemas.ts';
import { dismiss, reverify, type ReviewActionDeps } from './actions.ts';
import { listReviews, reviewFilterSchema, reviewListSchema, reviewViewSchema } from './queries.ts';

const idParams = z.object({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) });

/**
 * Reviews: events that failed verification. List them with their reasons; re-verify one now, or dismiss it with a
 * note. The rules (role, reason, audit) live in actions.ts; these routes only call it.
 */
export const reviewsApi: FastifyPluginAsyncZod<ReviewActionDeps> = async (app, deps) => {
  app.get(
    '/api/reviews',
    {
      schema: {
        summary: 'Reviews, newest first',
        description: 'Events that failed verification, with reasons. Page with `before` (the `nextBefore` of the previous page).',
        tags: ['reviews'],
        querystring: reviewFilterSchema,
        response: { 200: reviewListSchema, 400: errorBodySchema },
      },
    },
    async (req) => listReviews(deps.db, req.query, req.operator!.role),
  );

  app.post(
    '/api/reviews/:id/reverify',
    {
      schema: {
        summary: 'Re-verify a review now',
        description:
          'Runs the event through the worker\'s applyEvent (source "review", no waiting): Get order is asked now; if it confirms, the order is credited or finalised once and the review is resolved in the same transaction. Otherwise the review stays open with the new reason. Role operator; `reason` required.',
        tags: ['reviews'],
        params: idParams,
        body: z.strictObject({ reason: reasonSchema.optional() }).optional(),
        response: {
          200: z.object({
            outcome: z.enum(['applied', 'duplicate', 'review']).describe('applied: credited/finalised now; duplicate: applied before; review: still failing'),
            review: reviewViewSchema,
          }),
          400: errorBodySchema,
          403: errorBodySchema,
          404: errorBodySchema,
          409: errorBodySchema.describe('The review is not open'),
          503: errorBodySchema.describe('The platform or the database is unreachable; nothing changed'),
        },
      },
    },
    async (req) => reverify(deps, actorOf(req), req.params.id, req.body?.reason),
  );

  app.post(
    '/api/reviews/:id/dismiss',
    {
      schema: {
        summary: 'Dismiss a review with a note',
        description:
          'Closes an open review without applying its event (for example a forged callback). `reason` is required (the audit trail); `note` is kept on the review (the reason when omitted). Role operator.',
        tags: ['reviews'],
        params: idParams,
        body: z.strictObject({ reason: reasonSchema.optional(), note: z.string().max(2000).optional() }).optional(),
        response: { 200: z.object({ review: reviewViewSchema }), 400: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 409: errorBodySchema },
      },
    },
    async (req) => ({ review: await dismiss(deps, actorOf(req), req.params.id, req.body?.reason, req.body?.note) }),
  );
};
