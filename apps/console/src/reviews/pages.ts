import { listScopeOf } from '../operators/scope.ts';
import { merchantChoices } from '../web/merchant-field.ts';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { safeNext } from '../session/pages.ts';
import { formRoute, pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { dismiss, reverify, type ReviewActionDeps } from './actions.ts';
import { reviewTarget } from './api.ts';
import { listReviews, reviewFilterSchema } from './queries.ts';
import { reviewsInbox } from './views.ts';
import { reverifiedLine } from './words.ts';

const idParams = z.object({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) });
/** A review card's form: the reason, and the page it was posted from. */
const reviewForm = z.object({ reason: z.string().optional(), back: z.string().optional() });
const backOf = (req: { body?: unknown }) => safeNext((req.body as { back?: unknown } | undefined)?.back ?? '/reviews');

/** The reviews inbox (`/reviews`) and its two form actions, which call the same actions as the API. */
export function reviewsPageRows(deps: ReviewActionDeps): RouteRow[] {
  return [
    pageRoute({
      url: '/reviews',
      action: 'read',
      handler: async (req, reply) => {
        const q = req.query as Record<string, unknown>;
        const filter = reviewFilterSchema.parse({
          status: typeof q.status === 'string' && q.status ? q.status : 'open',
          merchantOrderNo: typeof q.merchantOrderNo === 'string' && q.merchantOrderNo ? q.merchantOrderNo : undefined,
          merchant: typeof q.merchant === 'string' && q.merchant ? q.merchant : undefined,
          before: q.before || undefined,
          limit: 25,
        });
        const scope = listScopeOf(req.operator!, deps.merchants, filter.merchant);
        const list = await listReviews(deps.db, filter, req.operator!.role, scope.merchantNos, scope.refOf);
        return sendPage(
          req,
          reply,
          { title: 'Reviews', area: 'reviews', flash: flashOf(req.query) },
          reviewsInbox(list, filter, req.operator!, req.url, merchantChoices(req.operator!, deps.merchants)),
        );
      },
    }),

    formRoute({
      url: '/reviews/:id/reverify',
      action: 'reviews.reverify',
      target: reviewTarget,
      params: idParams,
      form: reviewForm,
      back: backOf,
      run: async (req, { params: { id }, form }) => {
        const { outcome, review } = await reverify(deps, actorOf(req), id, form.reason);
        return `Review ${id} re-verified: ${reverifiedLine(outcome, review.status)}`;
      },
    }),

    formRoute({
      url: '/reviews/:id/dismiss',
      action: 'reviews.dismiss',
      target: reviewTarget,
      params: idParams,
      form: reviewForm,
      back: backOf,
      run: async (req, { params: { id }, form }) => {
        await dismiss(deps, actorOf(req), id, form.reason);
        return `Review ${id} dismissed; nothing was credited.`;
      },
    }),
  ];
}
