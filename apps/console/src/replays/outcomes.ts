/**
 * What became of the jobs a replay sent back, read from where the worker reports them (callback_arrivals) and
 * the orders they are for: credited, finalised, duplicate, review, failed again, or back to retrying; with the
 * orders' money by currency (Postgres sums the `numeric` amounts: exact text, never a float).
 */
import { callbackArrivals, orders, replayJobs, type Database } from '@mcb/core/db';
import { sumDecimals } from '@mcb/core/money';
import { and, eq, inArray, sql } from 'drizzle-orm';
import { z } from 'zod';
import { REPLAY_OUTCOMES, type ReplayOutcome } from './words.ts';

export { OUTCOME_WORDS, REPLAY_OUTCOMES, type ReplayOutcome } from './words.ts';

export const replayOutcomeSchema = z.object({
  outcome: z.enum(REPLAY_OUTCOMES),
  jobs: z.number().int(),
  currency: z.string().nullable().describe("Our orders' currency; null for callbacks naming no order of ours"),
  amount: z.string().describe("The sum of our orders' amounts (exact decimal text)"),
});
export type ReplayOutcomeRow = z.output<typeof replayOutcomeSchema>;

function outcomeOf(status: string | null, outcome: string | null): ReplayOutcome {
  if (status === 'applied') return outcome === 'credited' ? 'credited' : 'finalised';
  if (status === 'duplicate') return 'duplicate';
  if (status === 'review') return 'review';
  if (status === 'failed') return 'failedAgain';
  return 'retrying'; // sent back and not run yet, running, retrying or waiting
}

/** The outcomes of each replay in `ids` (none for a replay that sent nothing back yet). */
export async function replayOutcomes(db: Database, ids: readonly number[]): Promise<Map<number, ReplayOutcomeRow[]>> {
  const out = new Map<number, ReplayOutcomeRow[]>();
  if (ids.length === 0) return out;
  const rows = await db
    .select({
      replayId: replayJobs.replayId,
      status: callbackArrivals.status,
      outcome: callbackArrivals.outcome,
      currency: orders.currency,
      jobs: sql<number>`count(*)::int`,
      amount: sql<string>`coalesce(sum(${orders.amount}), 0)::text`,
    })
    .from(replayJobs)
    .leftJoin(
      callbackArrivals,
      and(eq(callbackArrivals.jobId, replayJobs.jobId), eq(callbackArrivals.merchantNo, replayJobs.merchantNo)),
    )
    .leftJoin(
      orders,
      and(
        eq(orders.merchantOrderNo, callbackArrivals.merchantOrderNo),
        eq(orders.merchantNo, callbackArrivals.merchantNo),
      ),
    )
    .where(inArray(replayJobs.replayId, [...ids]))
    .groupBy(replayJobs.replayId, callbackArrivals.status, callbackArrivals.outcome, orders.currency);
  // Several statuses fold into one outcome (waiting and retrying): merged here, the amounts summed exactly.
  const merged = new Map<string, { replayId: number; row: ReplayOutcomeRow; amounts: string[] }>();
  for (const r of rows) {
    const outcome = outcomeOf(r.status, r.outcome);
    const key = JSON.stringify([r.replayId, outcome, r.currency]);
    const m =
      merged.get(key) ??
      merged
        .set(key, { replayId: r.replayId, row: { outcome, jobs: 0, currency: r.currency, amount: '0' }, amounts: [] })
        .get(key)!;
    m.row.jobs += r.jobs;
    m.amounts.push(r.amount);
  }
  for (const { replayId, row, amounts } of merged.values()) {
    const list = out.get(replayId) ?? out.set(replayId, []).get(replayId)!;
    list.push({ ...row, amount: sumDecimals(amounts) });
  }
  for (const list of out.values())
    list.sort(
      (a, b) =>
        REPLAY_OUTCOMES.indexOf(a.outcome) - REPLAY_OUTCOMES.indexOf(b.outcome) ||
        String(a.currency).localeCompare(String(b.currency)),
    );
  return out;
}
