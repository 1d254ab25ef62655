/** Replays as the API, the pages and the CLI show them: one view model, its zod schema the API's response. */
import { replays, type Database, type Replay } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { desc, eq, inArray, sql } from 'drizzle-orm';
import type { MerchantQueues } from '../callbacks/merchant-queues.ts';
import type { Operator } from '../operators/operator.ts';
import { inScope } from '../operators/scope.ts';
import { pickByRef } from '../web/route-deps.ts';
import { z } from 'zod';
import { callbackFilterSchema } from '../callbacks/queries.ts';
import { replayOutcomes, replayOutcomeSchema, type ReplayOutcomeRow } from './outcomes.ts';

export const replayViewSchema = z.object({
  id: z.number().int(),
  operator: z.string(),
  reason: z.string(),
  filter: callbackFilterSchema,
  ratePerSecond: z.number().int(),
  status: z
    .enum(['running', 'cancelled', 'finished'])
    .describe('running until every job was sent back (finished) or an operator cancelled it'),
  total: z.number().int().describe("Failed jobs in its set when it started (its dry run's, when it was given one)"),
  replayed: z.number().int().describe('Jobs sent back to the queue'),
  skipped: z.number().int().describe('Jobs no longer failed or no longer in the queue'),
  remaining: z.number().int(),
  error: z.string().nullable().describe('The last error the driver met (it keeps going), if any'),
  endedBy: z.string().nullable().describe('Who cancelled it (null while it runs, or when it finished by itself)'),
  endReason: z.string().nullable().describe('Why it was cancelled, as they wrote it'),
  planAsOf: z
    .string()
    .nullable()
    .describe('The set it acts on: failed jobs matching the filter last reported at or before this time...'),
  planUpTo: z.string().nullable().describe('...and of job id at most this one (null: no bound on the id)'),
  createdAt: z.string(),
  updatedAt: z.string(),
  finishedAt: z.string().nullable(),
  outcomes: z
    .array(replayOutcomeSchema)
    .describe('What became of the jobs it sent back, by outcome and currency, with the money'),
});
export type ReplayView = z.output<typeof replayViewSchema>;

export function replayView(r: Replay, outcomes: ReplayOutcomeRow[] = []): ReplayView {
  return {
    id: r.id,
    operator: r.operator,
    reason: r.reason,
    filter: callbackFilterSchema.parse(r.filter),
    ratePerSecond: r.ratePerSecond,
    status: r.status,
    total: r.total,
    replayed: r.replayed,
    skipped: r.skipped,
    remaining: Math.max(0, r.total - r.replayed - r.skipped),
    error: r.error,
    endedBy: r.endedBy,
    endReason: r.endReason,
    planAsOf: r.planAsOf?.toISOString() ?? null,
    planUpTo: r.planUpTo,
    createdAt: r.createdAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
    finishedAt: r.finishedAt?.toISOString() ?? null,
    outcomes,
  };
}

/** One replay; 404 NOT_FOUND when there is none. */
export async function getReplay(db: Database, id: number): Promise<ReplayView> {
  const [row] = await db.select().from(replays).where(eq(replays.id, id));
  if (!row) throw new AppError(ErrorCodes.NOT_FOUND, `no replay ${id}`);
  return replayView(row, (await replayOutcomes(db, [id])).get(id));
}

/** The newest replays first; `refs`: only those of these merchants (a replay's `filter.merchant`). */
export async function listReplays(db: Database, limit = 50, refs?: readonly string[]): Promise<ReplayView[]> {
  const rows = await db
    .select()
    .from(replays)
    .where(refs ? inArray(sql<string>`${replays.filter}->>'merchant'`, [...refs]) : undefined)
    .orderBy(desc(replays.id))
    .limit(limit);
  const outcomes = await replayOutcomes(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => replayView(r, outcomes.get(r.id)));
}

/**
 * The merchants (refs) a list of replays keeps to, by `?merchant=` and the reader's scope, as every list does
 * (operators/scope.ts): a ref outside the scope is the 400 of an unknown one. undefined: no filter (one merchant, or
 * an unscoped reader naming none).
 */
export function replayRefsFor(
  reader: Pick<Operator, 'scope'>,
  queues: MerchantQueues,
  ref: string | undefined,
): readonly string[] | undefined {
  if (!queues.several) {
    if (ref) queues.of(ref);
    return undefined;
  }
  const visible = queues.list.filter((m) => inScope(reader, m.merchantNo));
  if (ref) return [pickByRef(visible, (m) => m.ref, ref).ref];
  return reader.scope ? visible.map((m) => m.ref) : undefined;
}

/** One replay the reader may see: another merchant's is the 404 of a missing one. */
export async function getVisibleReplay(
  db: Database,
  queues: MerchantQueues,
  reader: Pick<Operator, 'scope'>,
  id: number,
): Promise<ReplayView> {
  const replay = await getReplay(db, id);
  const mq = queues.list.find((m) => m.ref === replay.filter.merchant) ?? (queues.several ? undefined : queues.list[0]);
  if (!inScope(reader, mq?.merchantNo)) throw new AppError(ErrorCodes.NOT_FOUND, `no replay ${id}`);
  return replay;
}
