/**
 * The searchable record of each callback the worker takes (callback_arrivals): one row per job id, written when a
 * worker first takes the job and after each attempt, so the console finds an order's callbacks by merchant order
 * number even while they wait or after they failed for good (no receipt yet). Off the money path: rows go through
 * a {@link Batcher}, one upsert per batch of jobs, and the job never waits for them; a lost row is rewritten by the
 * job's next attempt, and a row that cannot be written is logged, never a job failure.
 */
import { Batcher, type Settled } from '@mcb/core/batcher';
import { callbackArrivals, type Database } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { CallbackJob } from '@mcb/core/queue';
import type { ApplyOutcome } from '@mcb/settlement';
import type { Job } from 'bullmq';
import { sql } from 'drizzle-orm';

type ArrivalRow = typeof callbackArrivals.$inferInsert;
export type ArrivalStatus = ArrivalRow['status'];

/** What one attempt came to, as the search shows it. */
export interface AttemptReport {
  status: Exclude<ArrivalStatus, 'active'>;
  outcome?: string | null;
  code?: string | null;
  detail?: string | null;
  /** Attempts made so far. @defaultValue the job's attemptsMade + 1 (the attempt that just ran) */
  attempts?: number;
}

/** Records arrivals and attempt outcomes; both return at once (the write is batched in the background). */
export interface ArrivalRecorder {
  /** The worker took the job for an attempt (recorded on the first attempt only). */
  taken(job: Job, event: CallbackJob): void;
  /** An attempt ended. */
  settled(job: Job, event: CallbackJob, report: AttemptReport): void;
  /** Resolves once every row submitted so far is written or given up. */
  flush(): Promise<void>;
}

/** Options of {@link createArrivalRecorder}. */
export interface ArrivalRecorderOptions {
  /** Largest upsert (rows per statement). @defaultValue 256 */
  maxBatch?: number;
  /** Told each batch's size (a metric). */
  onBatch?: (size: number) => void;
}

/**
 * Upsert `rows` by job id. Rows of one job in one batch (taken, then settled) collapse to the last; a report older
 * than the stored one (a stalled attempt's late word) changes nothing.
 */
async function upsertArrivals(db: Database, rows: readonly ArrivalRow[]): Promise<Settled<void>[]> {
  const byJob = new Map<string, ArrivalRow>();
  for (const row of rows) {
    const earlier = byJob.get(row.jobId);
    byJob.set(row.jobId, earlier ? { ...row, firstSeenAt: earlier.firstSeenAt } : row);
  }
  const t = callbackArrivals;
  await db
    .insert(t)
    .values([...byJob.values()])
    .onConflictDoUpdate({
      target: t.jobId,
      set: {
        // A job id is reused after a reviewed job released it: the newer callback's fields replace the older's.
        kind: sql`excluded.kind`,
        orderNo: sql`excluded.order_no`,
        state: sql`excluded.state`,
        merchantOrderNo: sql`excluded.merchant_order_no`,
        amount: sql`excluded.amount`,
        receivedAt: sql`excluded.received_at`,
        firstSeenAt: sql`least(${t.firstSeenAt}, excluded.first_seen_at)`,
        updatedAt: sql`excluded.updated_at`,
        attempts: sql`excluded.attempts`,
        status: sql`excluded.status`,
        outcome: sql`excluded.outcome`,
        lastCode: sql`excluded.last_code`,
        lastDetail: sql`excluded.last_detail`,
      },
      setWhere: sql`excluded.updated_at >= ${t.updatedAt}`,
    });
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

export function createArrivalRecorder(db: Database, logger: Logger, options: ArrivalRecorderOptions = {}): ArrivalRecorder {
  const batcher = new Batcher<ArrivalRow, void>((rows) => upsertArrivals(db, rows), { maxBatch: options.maxBatch ?? 256, onBatch: options.onBatch });
  const pending = new Set<Promise<void>>();
  let lastLog = 0;
  let lost = 0;
  const submit = (row: ArrivalRow) => {
    const p = batcher
      .submit(row)
      .catch((e: unknown) => {
        lost++;
        // Postgres down: the job's own commit fails too and it is retried, which writes its row again.
        if (Date.now() - lastLog < 10_000) return;
        logger.warn({ err: coerceError(e), rowsLost: lost }, 'could not record callback arrivals for the console search; the next attempt writes them again');
        lastLog = Date.now();
        lost = 0;
      })
      .finally(() => pending.delete(p));
    pending.add(p);
  };
  const base = (job: Job, event: CallbackJob, now: Date) => {
    const received = new Date(event.receivedAt);
    return {
      jobId: job.id!,
      kind: event.kind,
      orderNo: event.orderNo,
      state: event.state,
      merchantOrderNo: event.merchantOrderNo,
      amount: event.kind === 'payin' ? event.fiatAmount : null,
      receivedAt: Number.isNaN(received.getTime()) ? new Date(job.timestamp) : received,
      firstSeenAt: now,
      updatedAt: now,
      attempts: job.attemptsMade + 1,
    };
  };
  return {
    taken(job, event) {
      if (job.attemptsMade > 0) return; // its row exists since its first attempt (or is rewritten when it ends)
      submit({ ...base(job, event, new Date()), status: 'active', outcome: null, lastCode: null, lastDetail: null });
    },
    settled(job, event, report) {
      submit({
        ...base(job, event, new Date()),
        ...(report.attempts === undefined ? {} : { attempts: report.attempts }),
        status: report.status,
        outcome: report.outcome ?? null,
        lastCode: report.code ?? null,
        lastDetail: report.detail?.slice(0, 300) ?? null,
      });
    },
    async flush() {
      while (pending.size > 0) await Promise.all([...pending]);
    },
  };
}
