import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { errorBodySchema, reasonSchema } from '../web/api-schemas.ts';
import { route, type RouteRow } from '../web/route-table.ts';
import { reconcileNow, sweepTarget, type ReconcileActionDeps } from './actions.ts';
import { MERCHANT_FIELD_DESCRIPTION } from '../web/route-deps.ts';

const count = z.number().int().nonnegative();
const reportSchema = z.object({
  scanned: count.describe('Pending orders looked up with Get order'),
  recovered: z.object({ credited: count, succeeded: count, refused: count }).describe('Orders this sweep finalised'),
  stillPending: count.describe('Get order reports them not final: left pending'),
  unknown: count.describe('The platform does not know them (e.g. 40404): left pending, no review'),
  orders: z
    .object({ stillPending: z.array(z.string()), unknown: z.array(z.string()) })
    .describe('The merchant order numbers found still pending and unknown (the first 100 of each)'),
  duplicates: count.describe('Applied by a callback meanwhile'),
  reviews: count.describe("Get order's answer failed verification: sent to review, not credited"),
  errors: count.describe('Orders the sweep could not decide (platform or database failing)'),
  beyondMaxAge: count.describe('Pending orders older than RECONCILE_MAX_AGE, which no sweep looks at'),
  stoppedEarly: z.boolean(),
  stopReason: z.string().nullable(),
  durationMs: count,
  startedAt: z.string(),
  window: z.object({ oldest: z.string(), newest: z.string() }).describe('The creation times swept'),
});

/**
 * `POST /api/reconcile`: run a sweep now, in this process, under the workers' lock, and answer what it found.
 * A sweep already running (scheduled or manual) answers 409 at once rather than queueing a second one.
 */
export function reconcileRows(deps: ReconcileActionDeps): RouteRow[] {
  return [
    route({
      method: 'POST',
      url: '/api/reconcile',
      action: 'reconcile.run',
      target: (req) =>
        sweepTarget((req.body as { merchant?: unknown } | undefined)?.merchant as string | undefined, deps.several),
      schema: {
        summary: 'Run a reconciliation sweep now',
        description:
          'Looks up pending orders created between RECONCILE_MAX_AGE and RECONCILE_MIN_AGE ago with Get ' +
          'order, at RECONCILE_RATE, and applies final states as their callbacks would have been. Answers ' +
          'when the sweep is done, naming the orders still pending and unknown. Role operator; `reason` ' +
          'required. `merchant` (a ref) names whose orders, lock and platform client: required when the console ' +
          'serves two or more merchants. See docs/reconciliation.md.',
        tags: ['reconciliation'],
        body: z
          .strictObject({
            reason: reasonSchema.optional(),
            merchant: z.string().max(64).optional().describe(MERCHANT_FIELD_DESCRIPTION),
          })
          .optional(),
        response: {
          200: reportSchema,
          400: errorBodySchema,
          403: errorBodySchema,
          409: errorBodySchema.describe(
            'A sweep is already running (RECONCILE_IN_PROGRESS), or the merchant is paused (MERCHANT_PAUSED)',
          ),
          503: errorBodySchema.describe('The sweep lock could not be asked for (RECONCILE_UNAVAILABLE)'),
        },
      },
      handler: async (req) =>
        reconcileNow(deps, actorOf(req), { reason: req.body?.reason, merchant: req.body?.merchant }),
    }),
  ];
}
