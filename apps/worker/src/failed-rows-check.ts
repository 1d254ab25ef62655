/**
 * BullMQ's failed set is the truth of which callback jobs failed for good; the console's rows (callback_arrivals)
 * are what replay by filter, its dry run and the Callbacks page read. A job's `failed` row can still go missing: its
 * worker stopped while Postgres was down (the row lived only in the recorder's memory), or a report passed it. This
 * check walks the failed set, at start and then every interval, and writes a `failed` row for each failed job whose
 * row is missing or says otherwise, through the recorder (so the rows' ordering by progress decides, and a row that
 * cannot be written now is kept and tried again). A row already `failed` is left alone: one query per page of ids, and
 * only the jobs that need a row are read from Redis.
 */
import type { callbackArrivals, Database } from '@mcb/core/db';
import { coerceError, firstLineOf } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { attemptsBefore, callbackJobSchema } from '@mcb/core/queue';
import { poolOf } from '@mcb/settlement';
import type { Queue } from 'bullmq';
import type { ArrivalRecorder } from './arrival-recorder.ts';

/** What {@link startFailedRowsCheck} needs. */
export interface FailedRowsCheckDeps {
  db: Database;
  /** The callbacks queue (its failed set is read). The caller closes it. */
  queue: Queue;
  /**
   * The merchant number of the queue's jobs: only its rows are compared (two merchants' jobs may share a job id).
   * Undefined: the rows of every merchant (one merchant's deployment, tests).
   */
  merchantNo?: string | undefined;
  arrivals: ArrivalRecorder;
  logger: Logger;
  /** Interval between checks, in ms; the first runs at once. @defaultValue 60000 */
  everyMs?: number;
  /** Job ids read per page of the failed set. @defaultValue 500 */
  pageSize?: number;
}

/** A running check: `runOnce()` checks now (a running one is awaited instead); `stop()` ends it. */
export interface FailedRowsCheck {
  runOnce(): Promise<number>;
  stop(): Promise<void>;
}

type StoredRow = Pick<typeof callbackArrivals.$inferSelect, 'jobId' | 'status' | 'lastCode'>;

const ROWS_SQL = `SELECT job_id AS "jobId", status, last_code AS "lastCode"
  FROM callback_arrivals WHERE job_id = ANY($1::text[]) AND ($2::text IS NULL OR merchant_no = $2)`;

/** Start checking the failed set against the rows now and every `everyMs`; errors are logged, never thrown. */
export function startFailedRowsCheck(deps: FailedRowsCheckDeps): FailedRowsCheck {
  const everyMs = deps.everyMs ?? 60_000;
  let stopped = false;
  let running: Promise<number> | undefined;
  let timer: NodeJS.Timeout | undefined;
  const runOnce = () =>
    (running ??= checkFailedSet(deps, () => stopped)
      .catch((e: unknown) => {
        deps.logger.warn({ err: coerceError(e) }, 'failed-rows check: could not compare the failed set with the rows');
        return 0;
      })
      .finally(() => {
        running = undefined;
        if (!stopped) timer = setTimeout(() => void runOnce(), everyMs).unref();
      }));
  void runOnce();
  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/** One pass over the failed set, page by page; how many rows it wrote (handed to the recorder). */
async function checkFailedSet(deps: FailedRowsCheckDeps, stopped: () => boolean): Promise<number> {
  const size = deps.pageSize ?? 500;
  let written = 0;
  for (let start = 0; !stopped(); start += size) {
    const ids = await deps.queue.getRanges(['failed'], start, start + size - 1, true);
    written += await restorePage(deps, ids);
    if (ids.length < size) break;
  }
  if (written > 0) deps.logger.info({ rows: written }, 'failed-rows check: failed jobs without their `failed` row');
  return written;
}

/** Hand the recorder a `failed` row for each job of `ids` whose row is missing or not `failed`. */
async function restorePage(deps: FailedRowsCheckDeps, ids: readonly string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const { rows } = await poolOf(deps.db).query<StoredRow>(ROWS_SQL, [ids, deps.merchantNo ?? null]);
  const stored = new Map(rows.map((r) => [r.jobId, r]));
  const missing = ids.filter((id) => stored.get(id)?.status !== 'failed');
  let written = 0;
  for (const id of missing) {
    const job = await deps.queue.getJob(id);
    // Gone, or sent back to the queue since the page was read: nothing to restore.
    if (!job?.finishedOn || job.failedReason === undefined) continue;
    const event = callbackJobSchema.safeParse(job.data);
    if (!event.success) continue; // a payload no row can describe (JOB_PAYLOAD_INVALID): the failed set shows it
    deps.arrivals.settled(job, event.data, {
      status: 'failed',
      // The job keeps its error's message, not its code: the code of the attempt the row saw last, if any.
      code: stored.get(id)?.lastCode ?? null,
      detail: firstLineOf(job.failedReason),
      attempts: attemptsBefore(job) + job.attemptsMade,
    });
    written++;
  }
  return written;
}
