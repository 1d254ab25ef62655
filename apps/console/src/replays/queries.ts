/** Replays as the API, the pages and the CLI show them: one view model, its zod schema the API's response. */
import { replays, type Database, type Replay } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { desc, eq } from 'drizzle-orm';
import { z } from 'zod';
import { callbackFilterSchema } from '../callbacks/queries.ts';

export const replayViewSchema = z.object({
  id: z.number().int(),
  operator: z.string(),
  reason: z.string(),
  filter: callbackFilterSchema,
  ratePerSecond: z.number().int(),
  status: z.enum(['running', 'cancelled', 'finished']).describe('running until every job was sent back (finished) or an operator cancelled it'),
  total: z.number().int().describe('Failed jobs matching the filter when it started'),
  replayed: z.number().int().describe('Jobs sent back to the queue'),
  skipped: z.number().int().describe('Jobs no longer failed or no longer in the queue'),
  remaining: z.number().int(),
  error: z.string().nullable().describe('The last error the driver met (it keeps going), if any'),
  createdAt: z.string(),
  updatedAt: z.string(),
  finishedAt: z.string().nullable(),
});
export type ReplayView = z.output<typeof replayViewSchema>;

export function replayView(r: Replay): ReplayView {
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
    createdAt: r.createdAt.toISOString(),
    updatedAt: r.updatedAt.toISOString(),
    finishedAt: r.finishedAt?.toISOString() ?? null,
  };
}

/** One replay; 404 NOT_FOUND when there is none. */
export async function getReplay(db: Database, id: number): Promise<ReplayView> {
  const [row] = await db.select().from(replays).where(eq(replays.id, id));
  if (!row) throw new AppError(ErrorCodes.NOT_FOUND, `no replay ${id}`);
  return replayView(row);
}

/** The newest replays first. */
export async function listReplays(db: Database, limit = 50): Promise<ReplayView[]> {
  const rows = await db.select().from(replays).orderBy(desc(replays.id)).limit(limit);
  return rows.map(replayView);
}
