/**
 * "Run now": jobs waiting out a backoff (retrying, or waiting for Get order to be final) are promoted, so they run at
 * once instead of at their next retry: what an operator does once the platform is back, rather than wait up to ten
 * minutes per job. BullMQ's `job.promote()` moves a delayed job to the wait list; its attempts are untouched, and
 * the worker's checks (the receipt, Get order) decide as for any attempt, so it can never credit twice.
 * An action (queue.promote, the dashboard's "promote"): operator role, a reason, an audit row.
 */
import { AppError, ErrorCodes, coerceError } from '@mcb/core/errors';
import { callbackArrivals } from '@mcb/core/db';
import type { MerchantQueues } from './merchant-queues.ts';
import { and, asc, inArray } from 'drizzle-orm';
import { performExternalAction, type ActionDeps, type Actor } from '../audit/perform.ts';
import { filterTarget } from '../replays/actions.ts';
import { filterWhere, listOf, type ArrivalStatus, type CallbackFilter } from './queries.ts';

/** The statuses "run now" applies to: jobs that will run again by themselves, later. */
export const RUNNABLE: readonly ArrivalStatus[] = ['retrying', 'waiting'];

/** Most jobs one "run now" promotes (the rest: run it again). */
export const RUN_NOW_LIMIT = 1000;

export interface RunNowResult {
  /** Jobs moved from delayed to waiting. */
  promoted: number;
  /** Matched, but no longer delayed (running, finished) or gone from the queue. */
  skipped: number;
  /** More matched than {@link RUN_NOW_LIMIT}. */
  more: boolean;
}

/** The statuses a filter names for "run now": its retrying/waiting ones (both when it names none); 400 for others. */
export function runnableStatuses(filter: CallbackFilter): ArrivalStatus[] {
  const asked = listOf(filter.status);
  const other = asked.filter((s) => !RUNNABLE.includes(s));
  if (other.length > 0) {
    throw new AppError(
      ErrorCodes.REQUEST_INVALID,
      `"run now" runs jobs waiting out a backoff: status must be retrying or waiting (got ${other.join(', ')})`,
      {
        details: { errors: [{ field: 'status', message: 'retrying or waiting only' }] },
      },
    );
  }
  return asked.length > 0 ? asked : [...RUNNABLE];
}

/** The audit target of a "run now": the filter with the statuses it runs. */
export const runNowTarget = (filter: CallbackFilter): string =>
  filterTarget({ ...filter, status: runnableStatuses(filter) });

/**
 * While the fleet's breaker is open, the breaker holds these jobs: promoted, each would find Get order paused and be
 * put back at once. "Run now" then runs nothing and says why (503 PLATFORM_CIRCUIT_OPEN, its audit row
 * `failed:PLATFORM_CIRCUIT_OPEN`); they run by themselves once the breaker closes.
 */
function heldByTheBreaker(): AppError {
  return new AppError(
    ErrorCodes.PLATFORM_CIRCUIT_OPEN,
    'Nothing run now: the platform breaker is open and holds these jobs (Get order failed repeatedly). They run by ' +
      'themselves once it closes; run them now after that if they still wait.',
  );
}

/**
 * Promote the delayed jobs of the callbacks matching `filter` (retrying or waiting), oldest job id first; none while
 * `breakerOpen` says the fleet's breaker is open ({@link heldByTheBreaker}).
 */
export async function runNow(
  deps: ActionDeps & { queues: MerchantQueues; breakerOpen?: () => Promise<boolean> },
  actor: Actor,
  filter: CallbackFilter,
  reason: unknown,
): Promise<RunNowResult> {
  const statuses = runnableStatuses(filter);
  // One merchant's queue (`merchant`, required with several): a job id names a job in one merchant's queue only.
  const mq = deps.queues.of(filter.merchant);
  const scoped = { ...filter, status: statuses, merchantNo: deps.queues.several ? mq.merchantNo : undefined };
  return performExternalAction(
    deps,
    actor,
    { action: 'queue.promote', target: runNowTarget(filter), reason, merchant: mq.merchantNo },
    async () => {
      if (await deps.breakerOpen?.()) throw heldByTheBreaker();
      const rows = await deps.db
        .select({ jobId: callbackArrivals.jobId })
        .from(callbackArrivals)
        .where(and(filterWhere(scoped), inArray(callbackArrivals.status, statuses)))
        .orderBy(asc(callbackArrivals.jobId))
        .limit(RUN_NOW_LIMIT + 1);
      const more = rows.length > RUN_NOW_LIMIT;
      let promoted = 0;
      for (const { jobId } of rows.slice(0, RUN_NOW_LIMIT)) {
        const job = await mq.queue.getJob(jobId);
        if (!job || !(await job.isDelayed())) continue;
        try {
          await job.promote();
          promoted++;
        } catch (e) {
          // It left the delayed set meanwhile (its delay ran out, or someone else promoted it): nothing to do.
          if (!/not in the delayed state|Missing key/i.test(coerceError(e).message)) throw e;
        }
      }
      const skipped = Math.min(rows.length, RUN_NOW_LIMIT) - promoted;
      return { result: { promoted, skipped, more }, outcome: 'promoted', details: { promoted, skipped, more } };
    },
  );
}
