import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { safeNext } from '../session/pages.ts';
import { formAction } from '../web/forms.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { dismiss, reverify, type ReviewActionDeps } from './actions.ts';
import { listReviews, reviewFilterSchema } from './queries.ts';
import { reviewsInbox } from './views.ts';

const idParams = z.object({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) });
const formBody = z.object({ reason: z.string().optional(), back: z.string().optional() });

/** What each re-verify outcome means to the operator, in one line. */
const REVERIFIED: Record<string, string> = {
  applied: 'Get order confirmed it: credited (or finalised) once, review resolved.',
  duplicate: 'It had been applied already: nothing credited again, review resolved.',
  review: 'Get order still does not confirm it: the review stays open with the new reason.',
};

/** The reviews inbox (`/reviews`) and its two form actions, which call the same actions as the API. */
export const reviewsPages: FastifyPluginAsync<ReviewActionDeps> = async (app, deps) => {
  app.get('/reviews', { schema: { hide: true } }, async (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const filter = reviewFilterSchema.parse({
      status: typeof q.status === 'string' && q.status ? q.status : 'open',
      merchantOrderNo: typeof q.merchantOrderNo === 'string' && q.merchantOrderNo ? q.merchantOrderNo : undefined,
      before: q.before || undefined,
      limit: 25,
    });
    const list = await listReviews(deps.db, filter, req.operator!.role);
    return sendPage(
      req,
      reply,
      { title: 'Reviews', area: 'reviews', flash: flashOf(req.query) },
      reviewsInbox(list, filter, req.operator!, req.url),
    );
  });

  app.post('/reviews/:id/reverify', { schema: { hide: true } }, async (req, reply) => {
    const { id } = idParams.parse(req.params);
    const body = formBody.parse(req.body ?? {});
    return formAction(reply, safeNext(body.back ?? '/reviews'), async () => {
      const { outcome } = await reverify(deps, actorOf(req), id, body.reason);
      return `Review ${id} re-verified: ${REVERIFIED[outcome]}`;
    });
  });

  app.post('/reviews/:id/dismiss', { schema: { hide: true } }, async (req, reply) => {
    const { id } = idParams.parse(req.params);
    const body = formBody.parse(req.body ?? {});
    return formAction(reply, safeNext(body.back ?? '/reviews'), async () => {
      await dismiss(deps, actorOf(req), id, body.reason);
      return `Review ${id} dismissed; nothing was credited.`;
    });
  });
};
