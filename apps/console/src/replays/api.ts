import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { errorBodySchema } from '../web/api-schemas.ts';
import { route, type RouteRow } from '../web/route-table.ts';
import {
  cancelReplay,
  filterTarget,
  planReplayAction,
  replayRequestSchema,
  startReplay,
  type ReplayDeps,
} from './actions.ts';
import { replayPlanSchema } from './plan.ts';
import { getVisibleReplay, listReplays, replayRefsFor, replayViewSchema } from './queries.ts';
import { merchantRefSchema } from '../orders/schemas.ts';

const idParams = z.strictObject({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) });
/** Audit targets of a refusal, from the request as sent (before validation). */
const replayTarget = (req: FastifyRequest): string => `replay:${String((req.params as { id?: unknown }).id ?? '')}`;
const filterTargetOf = (req: FastifyRequest): string => {
  const parsed = replayRequestSchema.safeParse(req.body);
  return parsed.success ? filterTarget(parsed.data.filter) : 'replay:(invalid filter)';
};

const errors = { 400: errorBodySchema, 403: errorBodySchema, 404: errorBodySchema, 409: errorBodySchema };
/** A start's 409: PLAN_STALE carries a fresh dry run of the same filter. */
const startConflict = errorBodySchema.extend({
  plan: replayPlanSchema.optional().describe('PLAN_STALE: what a dry run of the same filter says now'),
});

/**
 * `POST /api/replays` (dry run or start), `GET /api/replays[/{id}]`, `POST /api/replays/{id}/cancel`: replay by
 * filter. The rules (role, reason, rate bound, audit row) are in actions.ts.
 */
export function replaysRows(deps: ReplayDeps): RouteRow[] {
  return [
    route({
      method: 'POST',
      url: '/api/replays',
      action: 'replays.start',
      actionOf: (req) =>
        (req.body as { dryRun?: unknown } | undefined)?.dryRun === true ? 'replays.plan' : 'replays.start',
      target: filterTargetOf,
      schema: {
        summary: 'Dry-run or start a replay of failed jobs by filter',
        description:
          'With `dryRun: true`, classifies each failed job matching `filter` against the ledger and Get ' +
          'order: alreadyApplied, willApply, willReview, stillPending, willFailAgain (and notReplayable: gone or ' +
          'no longer failed), with counts, samples, totals and the `bound` of the set it classified; changes ' +
          'nothing. Without it, starts a replay (a `reason` is required): 202 with its id; it sends the jobs ' +
          'back to the queue at `ratePerSecond`. Post the dry run back as `plan` and the replay acts on the ' +
          'set it classified only, or answers 409 PLAN_STALE (with a fresh dry run as `plan`) when that set changed.',
        tags: ['replays'],
        body: replayRequestSchema,
        response: {
          200: z.object({ plan: replayPlanSchema }),
          202: z.object({ replay: replayViewSchema }),
          ...errors,
          409: startConflict,
        },
      },
      handler: async (req, reply) => {
        const { filter, dryRun, ratePerSecond, reason, plan } = req.body;
        if (dryRun) return { plan: await planReplayAction(deps, actorOf(req), filter) };
        const replay = await startReplay(deps, actorOf(req), { filter, ratePerSecond, reason, plan });
        return reply.code(202).header('location', `/api/replays/${replay.id}`).send({ replay });
      },
    }),

    route({
      method: 'GET',
      url: '/api/replays',
      action: 'read',
      schema: {
        summary: 'Replays, newest first',
        description:
          "`?merchant=` (a ref): that merchant's only (unknown or outside your merchants: 400); unset: every " +
          'merchant you see. Each replay names its merchant in `filter.merchant`.',
        tags: ['replays'],
        querystring: z.strictObject({ merchant: merchantRefSchema.optional() }),
        response: { 200: z.object({ replays: z.array(replayViewSchema) }), 400: errorBodySchema },
      },
      handler: async (req) => ({
        replays: await listReplays(deps.db, 50, replayRefsFor(req.operator!, deps.queues, req.query.merchant)),
      }),
    }),

    route({
      method: 'GET',
      url: '/api/replays/:id',
      action: 'read',
      schema: {
        summary: "A replay's progress",
        tags: ['replays'],
        params: idParams,
        response: { 200: z.object({ replay: replayViewSchema }), ...errors },
      },
      handler: async (req) => ({
        replay: await getVisibleReplay(deps.db, deps.queues, req.operator!, req.params.id),
      }),
    }),

    route({
      method: 'POST',
      url: '/api/replays/:id/cancel',
      action: 'replays.cancel',
      target: replayTarget,
      schema: {
        summary: 'Cancel a running replay',
        description:
          'No further job is sent back (the driver stops within a second); jobs already sent back run to ' +
          'their end. A `reason` is required.',
        tags: ['replays'],
        params: idParams,
        body: z.strictObject({ reason: z.string().optional() }).optional(),
        response: { 200: z.object({ replay: replayViewSchema }), ...errors },
      },
      handler: async (req) => ({ replay: await cancelReplay(deps, actorOf(req), req.params.id, req.body?.reason) }),
    }),
  ];
}
