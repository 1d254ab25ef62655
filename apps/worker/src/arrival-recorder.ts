/**
 * The searchable record of each callback the worker takes (callback_arrivals): one row per merchant and job id, written when a
 * worker first takes the job and after each attempt, so the console finds an order's callbacks by merchant order
 * number even while they wait or after they failed for good (no receipt yet). Off the money path: rows go through
 * a {@link Batcher}, one upsert per batch of jobs, and the job never waits for them; a lost row is rewritten by the
 * job's next attempt, and a row that cannot be written is logged, never a job failure. A row Postgres did not take is
 * kept (the newest of each job) and written again every `retryFinalMs` until Postgres takes it: a job's last row
 * (`failed`: failed for good) has no next attempt to rewrite it, and it is what replay by filter and its dry run look
 * for (a Postgres outage is exactly when jobs use up their attempts); a `retrying` or `active` row may wait minutes for
 * its job's next attempt, and meanwhile the Callbacks page and the order page would not list the job. A row still
 * unwritten when the process stops is lost: the failed-rows check (failed-rows-check.ts) rewrites `failed` rows from
 * BullMQ's failed set, and the job's next attempt writes the others.
 *
 * Reports are ordered by the job's progress, never by a host's clock (workers' clocks differ): by its callback's
 * arrival (a job id reused after a review released it is a new job), then its attempts over all its runs (a replay
 * resets BullMQ's count, see `attemptsBefore`), then how far the attempt got (`active`, then `waiting`, then
 * `retrying`, then an end). A report behind the stored row changes nothing: a stalled attempt's late word, a row kept
 * through an outage while the job went on, a replay's `retrying` that a newer run's report already passed.
 *
 * Rows wait a little before they are written (held-rows.ts), which is what keeps the search cheap per credit: a first
 * attempt's `active` row waits up to `activeAfterMs` and is dropped when the attempt ends sooner (its outcome's row
 * replaces it anyway: one row write a job instead of an insert and an update), and `applied` and `duplicate` rows wait
 * up to `outcomeWithinMs` so that a steady stream of them goes in a few statements a second, not one per few jobs.
 */
import { Batcher, type Settled } from '@mcb/core/batcher';
import type { callbackArrivals, Database } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { attemptsBefore, type CallbackJob } from '@mcb/core/queue';
import { poolOf, type ApplyOutcome } from '@mcb/settlement';
import type { Job } from 'bullmq';
import { createHeldRows } from './held-rows.ts';

type ArrivalRow = typeof callbackArrivals.$inferInsert;
export type ArrivalStatus = ArrivalRow['status'];

/** What one attempt came to, as the search shows it. */
export interface AttemptReport {
  status: Exclude<ArrivalStatus, 'active'>;
  outcome?: string | null;
  code?: string | null;
  detail?: string | null;
  /**
   * Attempts made so far, over all the job's runs. @defaultValue `attemptsBefore(job)` + the job's attemptsMade + 1 (the
   * attempt that just ran)
   */
  attempts?: number;
}

/** Records arrivals and attempt outcomes; both return at once (the write is batched in the background). */
export interface ArrivalRecorder {
  /** The worker took the job for an attempt (recorded on the first attempt only). */
  taken(job: Job, event: CallbackJob): void;
  /** An attempt ended. */
  settled(job: Job, event: CallbackJob, report: AttemptReport): void;
  /**
   * Resolves once every row submitted so far is written or given up (the process is closing: `failed` rows still
   * held are tried once more, then no longer).
   */
  flush(): Promise<void>;
}

/** Options of {@link createArrivalRecorder}. */
export interface ArrivalRecorderOptions {
  /** Largest upsert (rows per statement). @defaultValue 256 */
  maxBatch?: number;
  /** Told each batch's size (a metric). */
  onBatch?: (size: number) => void;
  /** How often rows that could not be written are tried again, in ms. @defaultValue 5000 */
  retryFinalMs?: number;
  /** Most rows kept for another try; beyond it the oldest is dropped and logged. @defaultValue 100000 */
  maxUnwrittenFinal?: number;
  /** This host's clock (a row's `first_seen_at`, `updated_at`), in ms since the epoch. @defaultValue Date.now */
  now?: () => number;
  /**
   * How long a first attempt's `active` row may wait before it is written, in ms (half of it at least); an attempt
   * that ends sooner writes only its outcome's row (first seen when it was taken). The search shows a job as active
   * this much later at most. 0 writes it at once; the callback worker's recorder uses {@link WORKER_ARRIVAL_WAITS}.
   * @defaultValue 0
   */
  activeAfterMs?: number;
  /**
   * How long an `applied` or `duplicate` row may wait to be written with others, in ms (it waits half of it at least):
   * at a steady rate the rows of a tenth of a second go in one statement, not a statement per few rows. The rows of
   * retries, waits, reviews and failures never wait. 0 writes it at once. @defaultValue 0
   */
  outcomeWithinMs?: number;
}

/** The outcomes whose rows may wait (`outcomeWithinMs`); every other row is written at once. */
const SETTLED = new Set<ArrivalStatus>(['applied', 'duplicate']);

/**
 * The waits of the callback worker's recorder. Measured on a 2-core machine at about 1,000 jobs a second (jobs of
 * 55-70 ms): 0.02-0.03 ms of Postgres CPU a job against 0.08-0.14 with rows written at once, 55 statements for
 * 3,000 jobs against 335-764 (docs/performance.md).
 */
export const WORKER_ARRIVAL_WAITS = { activeAfterMs: 1000, outcomeWithinMs: 100 } as const;

/** How far an attempt got, by its report's status: an attempt's end passes its wait, its retry, its start. */
const STEP: Record<ArrivalStatus, number> = {
  active: 0,
  waiting: 1,
  retrying: 2,
  applied: 3,
  duplicate: 3,
  review: 3,
  failed: 3,
};
const STEP_SQL = (row: string) =>
  `(CASE ${row}.status WHEN 'active' THEN 0 WHEN 'waiting' THEN 1 WHEN 'retrying' THEN 2 ELSE 3 END)`;

/**
 * Whether report `a` is the job's progress beyond (or level with) report `b`: the later callback (a job id reused
 * after a review released it), then more attempts, then a further step. Never the hosts' clocks.
 */
export function isAtOrBeyond(a: ArrivalRow, b: ArrivalRow): boolean {
  const received = a.receivedAt.getTime() - b.receivedAt.getTime();
  if (received !== 0) return received > 0;
  if (a.attempts !== b.attempts) return a.attempts > b.attempts;
  return STEP[a.status] >= STEP[b.status];
}

/**
 * One statement for a whole batch: 15 array parameters unnested into rows, whatever the batch's size. Built once,
 * not per batch: drizzle's insert builder spent 6-12 % of the worker's CPU assembling 14 placeholders per row (bench
 * profile at 0 ms). A report replaces the stored row only if it is the job's progress at or beyond it
 * ({@link isAtOrBeyond}): a job id reused after a reviewed job released it is a later callback, whose fields replace
 * the older's; a report behind the stored one changes nothing.
 */
const UPSERT_SQL = `
INSERT INTO callback_arrivals AS t
       (job_id, kind, order_no, state, merchant_order_no, amount, received_at, first_seen_at, updated_at, attempts,
        status, outcome, last_code, last_detail, merchant_no)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::numeric[], $7::timestamptz[],
                     $8::timestamptz[], $9::timestamptz[], $10::int[], $11::text[], $12::text[], $13::text[], $14::text[],
                     $15::text[])
ON CONFLICT (job_id, merchant_no) DO UPDATE SET
       kind = excluded.kind, order_no = excluded.order_no, state = excluded.state,
       merchant_order_no = excluded.merchant_order_no, amount = excluded.amount, received_at = excluded.received_at,
       first_seen_at = least(t.first_seen_at, excluded.first_seen_at), updated_at = excluded.updated_at,
       attempts = excluded.attempts, status = excluded.status, outcome = excluded.outcome,
       last_code = excluded.last_code, last_detail = excluded.last_detail
 WHERE excluded.received_at > t.received_at
    OR (excluded.received_at = t.received_at
        AND (excluded.attempts, ${STEP_SQL('excluded')}) >= (t.attempts, ${STEP_SQL('t')}))`;

/**
 * A row's key: the merchant and the job id (a job id is unique within one merchant's queue only: `payin-{OrderNo}-
 * {state}`, and the platform may reuse an OrderNo across merchants).
 */
export function arrivalKey(row: Pick<ArrivalRow, 'merchantNo' | 'jobId'>): string {
  return `${row.merchantNo ?? ''}\u0000${row.jobId}`;
}

/**
 * Upsert `rows` by merchant and job id. Rows of one job in one batch (taken, then settled) collapse to the furthest.
 */
async function upsertArrivals(db: Database, rows: readonly ArrivalRow[]): Promise<Settled<void>[]> {
  const byJob = new Map<string, ArrivalRow>();
  for (const row of rows) {
    const key = arrivalKey(row);
    const earlier = byJob.get(key);
    if (!earlier) byJob.set(key, row);
    else if (isAtOrBeyond(row, earlier)) byJob.set(key, { ...row, firstSeenAt: earlier.firstSeenAt });
  }
  const list = [...byJob.values()];
  const column = <T>(pick: (r: ArrivalRow) => T) => list.map(pick);
  const time = (d: Date | undefined) => d?.toISOString();
  await poolOf(db).query(UPSERT_SQL, [
    column((r) => r.jobId),
    column((r) => r.kind),
    column((r) => r.orderNo),
    column((r) => r.state),
    column((r) => r.merchantOrderNo),
    column((r) => r.amount ?? null),
    column((r) => time(r.receivedAt)),
    column((r) => time(r.firstSeenAt)),
    column((r) => time(r.updatedAt)),
    column((r) => r.attempts),
    column((r) => r.status),
    column((r) => r.outcome ?? null),
    column((r) => r.lastCode ?? null),
    column((r) => r.lastDetail ?? null),
    column((r) => r.merchantNo),
  ]);
  return rows.map(() => ({ ok: true, value: undefined }));
}

/** The search's view of an attempt that ended with an outcome (not an error). */
export function attemptReport(outcome: ApplyOutcome): AttemptReport {
  switch (outcome.status) {
    case 'applied':
      return { status: 'applied', outcome: outcome.outcome };
    case 'duplicate':
      return { status: 'duplicate', outcome: outcome.reason };
    case 'review':
      return { status: 'review', code: outcome.code, detail: outcome.reason };
    case 'deferred':
      return { status: 'waiting', code: outcome.code, detail: outcome.reason };
  }
}

/** The fields of a job's row that every report carries, first seen `now` unless said otherwise. */
function arrivalRow(job: Job, event: CallbackJob, now: Date) {
  const received = new Date(event.receivedAt);
  return {
    jobId: job.id!,
    // The callback's MerchantNo: ingest accepts a callback on its own merchant's route and queue only.
    merchantNo: event.merchantNo,
    kind: event.kind,
    orderNo: event.orderNo,
    state: event.state,
    merchantOrderNo: event.merchantOrderNo,
    amount: event.kind === 'payin' ? event.fiatAmount : null,
    receivedAt: Number.isNaN(received.getTime()) ? new Date(job.timestamp) : received,
    firstSeenAt: now,
    updatedAt: now,
    attempts: attemptsBefore(job) + job.attemptsMade + 1,
  };
}

/**
 * Rows Postgres did not take, by merchant and job id (the furthest report of a job wins), handed to `resubmit` every
 * `retryFinalMs`; past `maxUnwrittenFinal` the oldest is dropped.
 */
function createUnwrittenRows(logger: Logger, options: ArrivalRecorderOptions, resubmit: (row: ArrivalRow) => void) {
  const retryMs = options.retryFinalMs ?? 5000;
  const max = options.maxUnwrittenFinal ?? 100_000;
  const rows = new Map<string, ArrivalRow>();
  let dropped = 0;
  let lastDropLog = 0;
  let timer: NodeJS.Timeout | undefined;
  const retryNow = () => {
    clearTimeout(timer);
    timer = undefined;
    const kept = [...rows.values()];
    rows.clear();
    for (const row of kept) resubmit(row);
  };
  const dropOldest = () => {
    const key = rows.keys().next().value!;
    const oldest = rows.get(key)!;
    rows.delete(key);
    dropped++;
    // A long outage with many jobs drops one row per new job: one line per 10 s, not one per row.
    if (Date.now() - lastDropLog < 10_000) return;
    logger.error(
      { jobId: oldest.jobId, merchantNo: oldest.merchantNo, rowsDropped: dropped, maxUnwrittenFinal: max },
      'too many callback rows wait for Postgres: the oldest dropped (their jobs are still on the queue)',
    );
    lastDropLog = Date.now();
    dropped = 0;
  };
  return {
    keep(row: ArrivalRow) {
      const key = arrivalKey(row);
      const held = rows.get(key);
      if (held && !isAtOrBeyond(row, held)) return;
      rows.delete(key);
      rows.set(key, row);
      if (rows.size > max) dropOldest();
      timer ??= setTimeout(retryNow, retryMs).unref();
    },
    retryNow,
    stop() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

export function createArrivalRecorder(
  db: Database,
  logger: Logger,
  options: ArrivalRecorderOptions = {},
): ArrivalRecorder {
  const batcher = new Batcher<ArrivalRow, void>((rows) => upsertArrivals(db, rows), {
    maxBatch: options.maxBatch ?? 256,
    onBatch: options.onBatch,
  });
  const pending = new Set<Promise<void>>();
  let lastLog = 0;
  let lost = 0;
  const clock = options.now ?? Date.now;
  const unwritten = createUnwrittenRows(logger, options, (row) => submit(row));
  const submit = (row: ArrivalRow) => {
    const p = batcher
      .submit(row)
      .catch((e: unknown) => {
        unwritten.keep(row);
        lost++;
        if (Date.now() - lastLog < 10_000) return;
        logger.warn(
          { err: coerceError(e), rowsUnwritten: lost },
          'could not record callback arrivals for the console search; they are kept and written again',
        );
        lastLog = Date.now();
        lost = 0;
      })
      .finally(() => pending.delete(p));
    pending.add(p);
  };
  const active = createHeldRows<ArrivalRow>(options.activeAfterMs ?? 0, submit);
  const outcomes = createHeldRows<ArrivalRow>(options.outcomeWithinMs ?? 0, submit);
  return {
    taken(job, event) {
      if (job.attemptsMade > 0) return; // its row exists since its first attempt (or is rewritten when it ends)
      const row = { ...arrivalRow(job, event, new Date(clock())), status: 'active' as const };
      active.hold(arrivalKey(row), { ...row, outcome: null, lastCode: null, lastDetail: null });
    },
    settled(job, event, report) {
      const now = new Date(clock());
      // The row it replaces, if still held, is not written; it was first seen when that row was made.
      const key = arrivalKey({ merchantNo: event.merchantNo, jobId: job.id! });
      const held = active.take(key) ?? outcomes.take(key);
      const row: ArrivalRow = {
        ...arrivalRow(job, event, now),
        firstSeenAt: held?.firstSeenAt ?? now,
        ...(report.attempts === undefined ? {} : { attempts: report.attempts }),
        status: report.status,
        outcome: report.outcome ?? null,
        lastCode: report.code ?? null,
        lastDetail: report.detail?.slice(0, 300) ?? null,
      };
      // Only the common, settled ends wait: a retry, a wait, a review or a failure is what a person looks for next.
      if (SETTLED.has(report.status)) outcomes.hold(key, row);
      else submit(row);
    },
    async flush() {
      active.release();
      outcomes.release();
      // Closing: one more try of the rows still kept, now rather than at the timer.
      unwritten.retryNow();
      while (pending.size > 0) await Promise.all([...pending]);
      unwritten.stop();
    },
  };
}
