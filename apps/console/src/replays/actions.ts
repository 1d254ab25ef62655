/**
 * Replay actions: plan (a dry run: no change, no audit row, but it asks Get order, so operators only), start and
 * cancel. The role, the reason and the audit row are checked and written here, in the transaction that creates or
 * cancels the replay (STYLE 18); the API and the pages only call these.
 */
import { replays } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { assertCan, performAction, type ActionDeps, type Actor } from '../audit/perform.ts';
import { can } from '../operators/roles.ts';
import { callbackFilterSchema, type CallbackFilter } from '../callbacks/queries.ts';
import { countCandidates, planReplay, replayWhere, type PlanDeps, type ReplayPlan } from './plan.ts';
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
});
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
  return planReplay(deps, filter);
}

/** Start a replay: 400 without a reason or above the rate bound, 403 for a viewer; the audit row commits with it. */
export async function startReplay(
  deps: ReplayDeps,
  actor: Actor,
  req: { filter: CallbackFilter; ratePerSecond?: number; reason?: string },
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
  replayWhere(req.filter); // 400 for a status other than failed, before anything is written
  const view = await performAction(
    deps,
    actor,
    { action: 'replays.start', target: filterTarget(req.filter), reason: req.reason },
    async (tx) => {
      const total = await countCandidates(tx, req.filter);
      const [row] = await tx
        .insert(replays)
        .values({
          operator: actor.operator.name,
          reason: String(req.reason).trim(),
          filter: req.filter,
          ratePerSecond: rate,
          total,
        })
        .returning();
      return {
        result: replayView(row!),
        outcome: 'started',
        details: { replayId: row!.id, total, ratePerSecond: rate },
      };
    },
  );
  deps.wake();
  return view;
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
  return performAction(deps, actor, { action, target: `replay:${id}`, reason }, async (tx) => {
    const [row] = await tx
      .update(replays)
      .set({ status: 'cancelled', finishedAt: sql`now()`, updatedAt: sql`now()` })
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
