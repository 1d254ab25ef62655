/**
 * Replay actions: plan (a dry run: no change, no audit row, but it asks Get order, so operators only), start and
 * cancel. The role, the reason and the audit row are checked and written here, in the transaction that creates or
 * cancels the replay (STYLE 18); the API and the pages only call these.
 */
import { AppError, ErrorCodes, isAppError } from '@mcb/core/errors';
import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { assertCan, assertInScope, performAction, type ActionDeps, type Actor } from '../audit/perform.ts';
import { can } from '../operators/roles.ts';
import { callbackFilterSchema, type CallbackFilter, type ScopedFilter } from '../callbacks/queries.ts';
import { callbackArrivals, replays, type Database } from '@mcb/core/db';
import {
  PLAN_LIMIT,
  digestOf,
  planBoundSchema,
  planReplay,
  planTotalSchema,
  replayCandidates,
  replayPlanSchema,
  replayScope,
  replayWhere,
  type PlanDeps,
  type ReplayPlan,
} from './plan.ts';
import { getReplay, replayView, type ReplayView } from './queries.ts';

/** What a replay's actions need: the action layer's, the dry run's, the rate bounds and the driver's wake-up. */
export interface ReplayDeps extends ActionDeps, PlanDeps {
  /** Rate when none is asked (CONSOLE_REPLAY_RATE). */
  defaultRate: number;
  /** Highest rate (CONSOLE_REPLAY_MAX_RATE). */
  maxRate: number;
  /** Tell the driver a replay was started. */
  wake: () => void;
}

/** The body of POST /api/replays (and of the wizard's form). */
export const replayRequestSchema = z.strictObject({
  filter: callbackFilterSchema,
  dryRun: z.boolean().default(false).describe('Classify only; start nothing'),
  ratePerSecond: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('Jobs sent back per second (default CONSOLE_REPLAY_RATE, at most CONSOLE_REPLAY_MAX_RATE)'),
  reason: z.string().optional().describe('Why (required to start)'),
  plan: z
    .object({
      bound: planBoundSchema,
      counts: replayPlanSchema.shape.counts.optional(),
      totals: z.array(planTotalSchema).optional(),
    })
    .optional()
    .describe(
      "The dry run's `plan` (its `bound`, and its `counts` and `totals` for the audit row): the replay acts on the " +
        'jobs it classified only, or answers 409 PLAN_STALE with a fresh dry run when that set changed. Without it, ' +
        'the replay acts on the failed jobs matching the filter when it starts.',
    ),
});
/** What a start posts back of its dry run. */
export type PostedPlan = NonNullable<z.output<typeof replayRequestSchema>['plan']>;
export type ReplayRequest = z.output<typeof replayRequestSchema>;

/** A short, stable name of what a replay covers, for the audit row's target. */
export function filterTarget(filter: CallbackFilter): string {
  const parts = Object.entries(filter)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${String(v)}`);
  return `callbacks:${parts.join(',') || 'all'}`;
}

/** Dry run: what replaying the failed jobs matching `filter` would do. */
export async function planReplayAction(deps: ReplayDeps, actor: Actor, filter: CallbackFilter): Promise<ReplayPlan> {
  assertCan(actor.operator, 'replays.plan');
  const { mq } = replayScope(deps.queues, filter);
  await assertInScope(deps, actor, { action: 'replays.plan', target: filterTarget(filter), merchant: mq.merchantNo });
  return planReplay(deps, filter);
}

/**
 * Start a replay: 400 without a reason or above the rate bound, 403 for a viewer; the audit row commits with it and
 * holds the dry run's totals. Given its dry run's `plan`, it acts on the set that dry run classified only, or answers
 * 409 PLAN_STALE (its body's `plan` a fresh dry run) when that set has changed since.
 */
export async function startReplay(
  deps: ReplayDeps,
  actor: Actor,
  req: { filter: CallbackFilter; ratePerSecond?: number; reason?: string; plan?: PostedPlan },
): Promise<ReplayView> {
  const rate = req.ratePerSecond ?? deps.defaultRate;
  if (rate > deps.maxRate) {
    throw new AppError(
      ErrorCodes.REQUEST_INVALID,
      `ratePerSecond ${rate} is above CONSOLE_REPLAY_MAX_RATE (${deps.maxRate}), what Get order is trusted to bear`,
      {
        details: { errors: [{ field: 'ratePerSecond', message: `at most ${deps.maxRate}` }] },
      },
    );
  }
  // 400 for a status other than failed, or without the merchant when there are several, before anything is written.
  // The filter keeps its `merchant`: the driver sends the jobs back to that merchant's queue.
  const { mq, scoped } = replayScope(deps.queues, req.filter);
  replayWhere(scoped);
  let view: ReplayView;
  try {
    view = await performAction(
      deps,
      actor,
      { action: 'replays.start', target: filterTarget(req.filter), reason: req.reason, merchant: mq.merchantNo },
      async (tx) => {
        const set = req.plan ? await plannedSet(tx, scoped, req.plan) : await currentSet(tx, scoped);
        const [row] = await tx
          .insert(replays)
          .values({
            operator: actor.operator.name,
            reason: String(req.reason).trim(),
            filter: req.filter,
            ratePerSecond: rate,
            total: set.total,
            planAsOf: new Date(set.asOf),
            planUpTo: set.upTo,
          })
          .returning();
        const plan = req.plan && { ...req.plan.bound, counts: req.plan.counts, totals: req.plan.totals };
        return {
          result: replayView(row!),
          outcome: 'started',
          details: { replayId: row!.id, total: set.total, ratePerSecond: rate, ...(plan ? { plan } : {}) },
        };
      },
    );
  } catch (e) {
    // The set changed: the refusal is in the audit; the operator gets what a dry run says now, to start from.
    if (isAppError(e, ErrorCodes.PLAN_STALE)) throw await staleWithPlan(deps, req.filter, e);
    throw e;
  }
  deps.wake();
  return view;
}

/** The set a dry run classified, as it stands now; PLAN_STALE unless it is still the very same jobs. */
async function plannedSet(db: Database, filter: ScopedFilter, plan: PostedPlan) {
  const { asOf, upToJobId, jobs, digest } = plan.bound;
  const rows = await replayCandidates(db, filter, null, PLAN_LIMIT + 1, { asOf, upTo: upToJobId });
  if (rows.length !== jobs || digestOf(rows) !== digest) {
    throw new AppError(
      ErrorCodes.PLAN_STALE,
      `the dry run classified ${jobs} failed job(s); ${rows.length} of that set are still failed as then, or it ` +
        'changed: dry run again and start from the new plan',
      { details: { planned: jobs, now: rows.length } },
    );
  }
  return { total: rows.length, asOf, upTo: upToJobId };
}

/** Without a dry run: the failed jobs matching the filter now, up to the newest failure reported. */
async function currentSet(db: Database, filter: ScopedFilter) {
  const [row] = await db
    .select({
      total: sql<number>`count(*)::int`,
      newest: sql<string | null>`max(date_trunc('milliseconds', ${callbackArrivals.updatedAt}))::text`,
      now: sql<string>`now()::text`,
    })
    .from(callbackArrivals)
    .where(replayWhere(filter));
  return { total: row!.total, asOf: new Date(row!.newest ?? row!.now).toISOString(), upTo: null };
}

/** PLAN_STALE with a fresh dry run of the same filter in its details (the 409's `plan`). */
async function staleWithPlan(deps: ReplayDeps, filter: CallbackFilter, e: AppError): Promise<AppError> {
  const plan = await planReplay(deps, filter);
  return new AppError(ErrorCodes.PLAN_STALE, e.message, { details: { ...e.details, plan }, cause: e });
}

/**
 * Cancel a running replay: the driver sees it at its next tick (within a second) and sends no further job back.
 * Jobs already sent back run to their end. Another operator's replay needs `replays.cancelOthers` (admin).
 */
export async function cancelReplay(deps: ReplayDeps, actor: Actor, id: number, reason: unknown): Promise<ReplayView> {
  const current = await getReplay(deps.db, id);
  // Someone who may not cancel at all is told the first role they lack (operator); an operator, that another's needs
  // admin.
  const own = current.operator === actor.operator.name || !can(actor.operator.role, 'replays.cancel');
  const action = own ? 'replays.cancel' : 'replays.cancelOthers';
  const merchant = replayMerchantNo(deps, current.filter);
  return performAction(deps, actor, { action, target: `replay:${id}`, reason, merchant }, async (tx) => {
    const [row] = await tx
      .update(replays)
      .set({
        status: 'cancelled',
        endedBy: actor.operator.name,
        endReason: String(reason).trim(),
        finishedAt: sql`now()`,
        updatedAt: sql`now()`,
      })
      .where(and(eq(replays.id, id), eq(replays.status, 'running')))
      .returning();
    if (!row) throw new AppError(ErrorCodes.REPLAY_NOT_RUNNING, `replay ${id} is ${current.status}, not running`);
    return {
      result: replayView(row),
      outcome: 'cancelled',
      details: { replayId: id, replayed: row.replayed, skipped: row.skipped, total: row.total },
    };
  });
}

/** The number of the merchant a replay's filter acts on (null when it names none the console serves). */
export function replayMerchantNo(deps: Pick<ReplayDeps, 'queues'>, filter: CallbackFilter): string | null {
  try {
    return deps.queues.of(filter.merchant, 'filter.merchant').merchantNo;
  } catch {
    return null;
  }
}
