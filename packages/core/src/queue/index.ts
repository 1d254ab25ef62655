import { z } from 'zod';
import type { Job } from 'bullmq';

export { CALLBACKS_QUEUE, MAINTENANCE_QUEUE, merchantKeys, type FleetKeys, type MerchantKeys } from './keys.ts';
export { readPausedBacklog, writePauseMirror, type PausedBacklog } from './pause-mirror.ts';

export { CALLBACK_KINDS, type CallbackKind } from '../spec.ts';
import type { CallbackKind } from '../spec.ts';

/** Job names on the `callbacks` queue: the event's kind. */
export const JobNames = { payin: 'payin', payout: 'payout' } as const;
/** Job names on the `maintenance` queue. */
export const MaintenanceJobs = { reconcile: 'reconcile', catalogRefresh: 'catalog-refresh' } as const;

/**
 * The contract's job id: `payin-{OrderNo}-{OrderState}` / `payout-{OrderNo}-{state}`. It only saves work (a
 * duplicate add is a no-op while the job is kept); the Postgres unique constraint is the guard.
 * BullMQ refuses ':' in custom ids, and OrderNo comes from outside, so the caller must pass a validated OrderNo.
 */
export function callbackJobId(kind: CallbackKind, orderNo: string, state: number): string {
  return `${kind}-${orderNo}-${state}`;
}

/** Exact decimal text (amounts never become floats). */
const decimalText = z.string().regex(/^-?\d+(\.\d+)?$/, 'expected a decimal string');

/** What ingest enqueues and the worker consumes: the decrypted record, normalised, amounts as text. */
export const callbackJobSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('payin'),
    orderNo: z.string().min(1),
    merchantNo: z.string().min(1),
    merchantOrderNo: z.string().min(1),
    /** OrderState as sent (always 6 for callbacks). */
    state: z.number().int(),
    /** PayTime as an ISO-8601 instant (the platform sends UTC+8 local time), or null. */
    payTime: z.string().nullable(),
    /** USDT quantity, exact text; null when the event was rebuilt from Get order, which does not report it. */
    quantity: decimalText.nullable(),
    /** Fiat amount (`FiatCurrency`), exact text. */
    fiatAmount: decimalText,
    /** When ingest accepted it (ISO-8601). */
    receivedAt: z.string(),
    /** Where the event came from. @defaultValue 'callback' */
    source: z.enum(['callback', 'reconcile', 'review']).default('callback'),
  }),
  z.object({
    kind: z.literal('payout'),
    orderNo: z.string().min(1),
    merchantNo: z.string().min(1),
    merchantOrderNo: z.string().min(1),
    /** `state` as sent: 4 succeeded, 5 refused. */
    state: z.number().int(),
    payTime: z.string().nullable(),
    receivedAt: z.string(),
    source: z.enum(['callback', 'reconcile', 'review']).default('callback'),
  }),
]);

export type CallbackJob = z.output<typeof callbackJobSchema>;
export type CallbackJobInput = z.input<typeof callbackJobSchema>;
export type PayinJob = Extract<CallbackJob, { kind: 'payin' }>;
export type PayoutJob = Extract<CallbackJob, { kind: 'payout' }>;

/** Name of the worker's custom backoff strategy (exponential with full jitter, capped); see apps/worker retry policy. */
export const CALLBACK_BACKOFF = 'callback-backoff';

/**
 * Options of every callback job, set by the producer (BullMQ stores attempts and backoff with the job).
 * - attempts: with the worker's capped exponential backoff (about 10 minutes at most between tries), 60 attempts
 *   ride out more than 8 hours of a Postgres or platform outage; permanent errors fail at once. The default: ingest
 *   sets CALLBACK_JOB_ATTEMPTS instead (callbackRetryWindow in @mcb/settlement says the window a number gives).
 * - completed jobs are kept 1 day (at most 100,000 of them), well past the platform's ~2-hour retry window, so a
 *   late duplicate callback collapses onto the completed job id instead of running again (the database would drop
 *   it anyway). That bounds their Redis budget to about 100 MiB (~1 KiB each), leaving headroom (docs/runbook.md).
 * - failed jobs are kept 30 days for replay from the dashboard.
 */
export const callbackJobOptions = {
  attempts: 60,
  /** Job notes (see {@link jobNote}) kept per job: the platform sends at most 5 attempts, copies included. */
  keepLogs: 100,
  backoff: { type: CALLBACK_BACKOFF },
  removeOnComplete: { age: 24 * 3600, count: 100_000 },
  removeOnFail: { age: 30 * 24 * 3600 },
} as const;

/**
 * How a person's replay sends a job back (replay by filter, a dashboard retry): with a fresh retry budget. BullMQ's
 * `job.retry()` keeps the attempt count by default, so a job that had used its 60 attempts would get one, run as its
 * last, and one more 503 would fail it for good again.
 */
export const REPLAY_RETRY_OPTIONS = { resetAttemptsMade: true, resetAttemptsStarted: true } as const;

/**
 * A note on a job's log, for the console's callback timeline (GET /api/callbacks, the order view): a later copy of
 * the callback reaching ingest (`received-again`), or an attempt that waited (`attempt-waiting`: order unknown, Get
 * order not final or refused) or failed (`attempt-failed`); and, written by {@link retryKeepingStory} when a job is
 * sent back to the queue, how its run before ended (`attempt-settled`, `job-failed`), which the retry wipes from the
 * job itself. One JSON object per log line; codes and one-line reasons only, never the record.
 */
export const jobNoteSchema = z.object({
  at: z.string(),
  event: z.enum(['received-again', 'attempt-waiting', 'attempt-failed', 'attempt-settled', 'job-failed']),
  attempt: z.number().int().optional(),
  code: z.string().optional(),
  detail: z.string().max(500),
});
export type JobNote = z.output<typeof jobNoteSchema>;

/** One job-log line for `note` (its detail cut to 300 characters), stamped now unless `at` is given. */
export function jobNote(note: Omit<JobNote, 'at'> & { at?: string }): string {
  return JSON.stringify({ ...note, at: note.at ?? new Date().toISOString(), detail: note.detail.slice(0, 300) });
}

/**
 * Send a failed (or completed) job back to the queue with a fresh retry budget (REPLAY_RETRY_OPTIONS), and note on
 * its log how its run before ended: the retry clears the job's result, failure and attempt count, and the console's
 * order timeline is only ever added to. The note goes after the retry succeeded (BullMQ refuses a job no longer in
 * `state`, and then there is nothing to note); it carries the old run's time, so the timeline orders it right even
 * if the new attempt already ran.
 */
export async function retryKeepingStory(
  job: Job,
  state: 'failed' | 'completed',
  opts: Parameters<Job['retry']>[1] = {},
): Promise<void> {
  // The attempts of the run that ends, kept on the job before the retry resets its count (attemptsBefore). From the
  // job as read, so two replays of one run write the same number.
  await job.updateProgress({ attemptsBefore: attemptsBefore(job) + job.attemptsMade });
  const before = {
    attemptsMade: job.attemptsMade,
    finishedOn: job.finishedOn,
    processedOn: job.processedOn,
    returnvalue: job.returnvalue as unknown,
    failedReason: job.failedReason,
  };
  await job.retry(state, { ...REPLAY_RETRY_OPTIONS, ...opts });
  await job.log(runEndNote(state, before)).catch(() => 0); // a note that cannot be written changes nothing about the job
}

/**
 * Attempts the job made in its runs before this one: a replay ({@link retryKeepingStory}) resets BullMQ's attempt
 * count for a fresh retry budget and keeps the count so far on the job's progress (`{ attemptsBefore }`), which a
 * retry leaves alone. `attemptsBefore(job) + job.attemptsMade` only grows, across replays too: the console's rows of a
 * job are ordered by it (a report of an earlier attempt or run never replaces a later one), never by a host's clock.
 */
export function attemptsBefore(job: Pick<Job, 'progress'>): number {
  const p = job.progress as { attemptsBefore?: unknown } | undefined;
  const n = typeof p === 'object' && p !== null ? p.attemptsBefore : undefined;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** The note of how a job's run ended, from the job's fields before a retry cleared them. */
export function runEndNote(
  state: 'failed' | 'completed',
  j: { attemptsMade: number; finishedOn?: number; processedOn?: number; returnvalue?: unknown; failedReason?: string },
): string {
  const attempt = j.attemptsMade || 1;
  if (state === 'failed') {
    const at = new Date(j.finishedOn ?? Date.now()).toISOString();
    return jobNote({
      at,
      event: 'job-failed',
      attempt: j.attemptsMade,
      detail: `failed for good after ${j.attemptsMade} attempt(s), kept for replay: ${j.failedReason ?? ''}`.trim(),
    });
  }
  const value = (j.returnvalue ?? null) as { status?: string; outcome?: string; code?: string } | null;
  const result = value?.status === 'applied' ? `${value.outcome}` : (value?.status ?? 'done');
  const at = new Date(j.processedOn ?? j.finishedOn ?? Date.now()).toISOString();
  return jobNote({
    at,
    event: 'attempt-settled',
    attempt,
    ...(value?.code ? { code: value.code } : {}),
    detail: `attempt ${attempt} settled it: ${result}`,
  });
}
