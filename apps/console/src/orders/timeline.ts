/**
 * The story of an order's callbacks in one list, in time order, without a tracing backend: each callback that
 * reached ingest (the first arrival stored with the job, later copies noted on the job by ingest), each job attempt
 * that failed or waited with its code and Get order's answer (noted on the job by the worker), the attempt that
 * settled it, the receipt, the ledger entries and the reviews. Jobs are kept a day after completion (30 days when
 * failed); after that the database part of the story remains.
 */
import {
  callbackReceipts,
  type callbackArrivals,
  ledgerEntries,
  operatorActions,
  replayJobs,
  replays,
  reviewOccurrences,
  reviews,
  type Database,
} from '@mcb/core/db';
import { ErrorCodes } from '@mcb/core/errors';
import { callbackJobId, jobNoteSchema, type CallbackKind, type JobNote } from '@mcb/core/queue';
import type { Job, Queue } from 'bullmq';
import { and, asc, eq, inArray, ne } from 'drizzle-orm';
import { z } from 'zod';
import { FORGERY_CODES } from '../callbacks/counts.ts';
import { arrivalsOf, platformOrderNosOf } from '../callbacks/queries.ts';
import { amountText, iso } from '../web/format.ts';
import { noteEntry, notesOfReceipts } from './notes.ts';

export const timelineEntrySchema = z.object({
  at: z.string().describe('ISO-8601 instant'),
  source: z.enum(['ingest', 'job', 'receipt', 'ledger', 'review', 'replay', 'operator', 'note']),
  event: z
    .enum([
      'received',
      'received-again',
      'attempt-waiting',
      'attempt-failed',
      'attempt-settled',
      'job-failed',
      'replayed',
      'applied',
      'ledger-entry',
      'review-opened',
      'review-closed',
      'differs-from-applied',
      'contradicts-get-order',
      'operator-action',
      'note',
    ])
    .describe('What happened (see docs/console.md, "Callback timeline")'),
  orderNo: z.string().nullable().describe("The platform's OrderNo"),
  state: z.number().int().nullable(),
  jobId: z.string().nullable(),
  attempt: z.number().int().nullable(),
  code: z.string().nullable().describe('Error or review code'),
  detail: z.string().describe('One line for a person'),
  operator: z.string().nullable().optional().describe('Who did it (replayed, operator-action)'),
  reason: z.string().nullable().optional().describe('Why, as the operator wrote it (replayed, operator-action)'),
  link: z
    .string()
    .nullable()
    .optional()
    .describe("The console page of what it refers to (the replay, the action's audit)"),
});
export type TimelineEntry = z.output<typeof timelineEntrySchema>;

/** The contract's job ids of one platform order: every final state of either kind. */
export const JOB_STATES: [CallbackKind, number][] = [
  ['payin', 6],
  ['payin', 3],
  ['payout', 4],
  ['payout', 5],
];

/** A job of the order, with its BullMQ state read once. */
export interface FoundJob {
  job: Job;
  state: string;
}

/** The jobs of `orderNo` (every final state), narrowed to `merchantOrderNo` when given. */
export async function jobsOfOrder(queue: Queue, orderNo: string, merchantOrderNo?: string): Promise<FoundJob[]> {
  const found = await Promise.all(JOB_STATES.map(([kind, state]) => queue.getJob(callbackJobId(kind, orderNo, state))));
  const jobs = found.filter(
    (j): j is Job =>
      !!j && (!merchantOrderNo || (j.data as { merchantOrderNo?: unknown }).merchantOrderNo === merchantOrderNo),
  );
  return Promise.all(jobs.map(async (job) => ({ job, state: await job.getState() })));
}

/** What is stored about an order's callbacks: receipts and reviews in Postgres, jobs on the queue. */
export interface CallbackRecords {
  receipts: (typeof callbackReceipts.$inferSelect)[];
  reviews: (typeof reviews.$inferSelect)[];
  /** Jobs of every platform order number the query or the rows name (at most 20 numbers). */
  jobs: FoundJob[];
  /** Callbacks the worker recorded whose job is no longer on the queue (a reviewed variant, an expired job). */
  gone?: (typeof callbackArrivals.$inferSelect)[];
}

/**
 * Load {@link CallbackRecords} once, for the search route and the timeline alike; `merchantNo` (several merchants)
 * keeps them to that merchant's (two merchants may use one merchant order number).
 */
export async function loadCallbackRecords(
  db: Database,
  queue: Queue | undefined,
  q: { orderNo?: string; merchantOrderNo?: string; merchantNo?: string },
): Promise<CallbackRecords> {
  const [receiptRows, reviewRows, arrivedOrderNos, arrivals] = await Promise.all([
    db
      .select()
      .from(callbackReceipts)
      .where(
        and(
          q.orderNo ? eq(callbackReceipts.orderNo, q.orderNo) : undefined,
          q.merchantOrderNo ? eq(callbackReceipts.merchantOrderNo, q.merchantOrderNo) : undefined,
          q.merchantNo ? eq(callbackReceipts.merchantNo, q.merchantNo) : undefined,
        ),
      )
      .orderBy(asc(callbackReceipts.id))
      .limit(200),
    db
      .select()
      .from(reviews)
      .where(
        and(
          q.orderNo ? eq(reviews.orderNo, q.orderNo) : undefined,
          q.merchantOrderNo ? eq(reviews.merchantOrderNo, q.merchantOrderNo) : undefined,
          q.merchantNo ? eq(reviews.merchantNo, q.merchantNo) : undefined,
        ),
      )
      .orderBy(asc(reviews.id))
      .limit(200),
    // Callbacks that arrived but have neither receipt nor review yet (waiting, failed for good): their jobs too.
    !q.orderNo && q.merchantOrderNo ? platformOrderNosOf(db, q.merchantOrderNo, q.merchantNo) : [],
    // Variants queued under another job id (same pair, other content: a forgery or a probe): their jobs too.
    q.merchantOrderNo ? arrivalsOf(db, q.merchantOrderNo, q.merchantNo) : [],
  ]);
  const orderNos = [
    ...new Set(
      [q.orderNo, ...arrivedOrderNos, ...receiptRows.map((r) => r.orderNo), ...reviewRows.map((r) => r.orderNo)].filter(
        (n): n is string => !!n,
      ),
    ),
  ].slice(0, 20);
  const jobs = queue ? (await Promise.all(orderNos.map((no) => jobsOfOrder(queue, no, q.merchantOrderNo)))).flat() : [];
  const known = new Set(jobs.map((j) => j.job.id));
  const others = arrivals.filter((a) => !known.has(a.jobId));
  const found = queue ? await Promise.all(others.map((a) => queue.getJob(a.jobId))) : others.map(() => undefined);
  const gone: (typeof callbackArrivals.$inferSelect)[] = [];
  for (const [i, job] of found.entries()) {
    if (job) jobs.push({ job, state: await job.getState() });
    else gone.push(others[i]!);
  }
  return { receipts: receiptRows, reviews: reviewRows, jobs, gone };
}

async function jobEntries(queue: Queue, { job, state }: FoundJob): Promise<TimelineEntry[]> {
  const data = job.data as { orderNo?: string; state?: number; receivedAt?: string; kind?: string };
  const base = { orderNo: data.orderNo ?? null, state: data.state ?? null, jobId: job.id ?? null };
  const entries: TimelineEntry[] = [
    {
      ...base,
      at: data.receivedAt ?? iso(job.timestamp),
      source: 'ingest',
      event: 'received',
      attempt: null,
      code: null,
      detail: `${data.kind ?? 'callback'} state ${data.state ?? '?'} acknowledged at ingest and queued as job ${job.id}`,
    },
  ];
  const { logs } = await queue.getJobLogs(job.id!, 0, 199, true);
  for (const line of logs) {
    let note: JobNote;
    try {
      note = jobNoteSchema.parse(JSON.parse(line));
    } catch {
      continue; // a line someone else wrote: not part of the story
    }
    entries.push({
      ...base,
      at: note.at,
      source: note.event === 'received-again' ? 'ingest' : 'job',
      event: note.event,
      attempt: note.attempt ?? null,
      code: note.code ?? null,
      detail: note.detail,
    });
  }
  if (state === 'completed' && job.finishedOn) {
    const value = job.returnvalue as { status?: string; outcome?: string; code?: string } | null;
    const result = value?.status === 'applied' ? `${value.outcome}` : (value?.status ?? 'done');
    // At the start of the settling attempt: its commit (the receipt, the ledger) follows it.
    const attempt = job.attemptsMade || 1;
    entries.push({
      ...base,
      at: iso(job.processedOn ?? job.finishedOn),
      source: 'job',
      event: 'attempt-settled',
      attempt,
      code: value?.code ?? null,
      detail: `attempt ${attempt} settled it: ${result}`,
    });
  } else if (state === 'failed' && job.finishedOn) {
    entries.push({
      ...base,
      at: iso(job.finishedOn),
      source: 'job',
      event: 'job-failed',
      attempt: job.attemptsMade,
      code: null,
      detail: `failed for good after ${job.attemptsMade} attempt(s), kept for replay: ${job.failedReason ?? ''}`.trim(),
    });
  }
  return entries;
}

/** Every entry about the order's callbacks, oldest first. At least one of the two numbers narrows the search. */
export async function callbackTimeline(
  db: Database,
  queue: Queue | undefined,
  q: { orderNo?: string; merchantOrderNo?: string },
): Promise<TimelineEntry[]> {
  return timelineOf(db, queue, await loadCallbackRecords(db, queue, q));
}

/** The timeline of records already loaded: adds the ledger entries of the receipts and the jobs' notes. */
export async function timelineOf(
  db: Database,
  queue: Queue | undefined,
  records: CallbackRecords,
): Promise<TimelineEntry[]> {
  const { receipts: receiptRows, reviews: reviewRows, jobs } = records;
  const [ledgerRows, differing, notes] = await Promise.all([
    ledgerOfReceipts(db, receiptRows),
    differingOf(db, reviewRows),
    notesOfReceipts(
      db,
      receiptRows.map((r) => r.id),
    ),
  ]);
  const jobIds = [
    ...new Set([...jobs.map((j) => j.job.id), ...receiptRows.map((r) => r.jobId)].filter((id): id is string => !!id)),
  ];
  const entries: TimelineEntry[] = [
    ...(queue ? (await Promise.all(jobs.map((j) => jobEntries(queue, j)))).flat() : []),
    ...(records.gone ?? []).flatMap(goneEntries),
    ...receiptRows.map(receiptEntry),
    ...ledgerEntriesOf(receiptRows, ledgerRows),
    ...reviewRows.flatMap(reviewEntries),
    ...differingEntries(reviewRows, differing),
    ...notes.map(noteEntry),
    ...(await replayEntries(db, jobIds, jobs)),
    ...(await operatorEntries(db, jobIds, reviewRows, jobs)),
  ];
  // Time order; at the same instant, the order in which things happen (arrival, attempt, replay, receipt, ledger).
  return entries.sort((a, b) => a.at.localeCompare(b.at) || RANK[a.source] - RANK[b.source]);
}

const RANK: Record<TimelineEntry['source'], number> = {
  ingest: 0,
  job: 1,
  replay: 2,
  operator: 2,
  receipt: 3,
  ledger: 4,
  review: 5,
  note: 5,
};

type ReceiptRow = CallbackRecords['receipts'][number];
type ReviewRow = CallbackRecords['reviews'][number];
type ArrivalRow = typeof callbackArrivals.$inferSelect;

/**
 * A row of the story told by a record (a receipt, a ledger entry, a review's finding): no attempt, and what it names
 * of the order's callbacks (unknown fields are null). The one builder of those rows.
 */
const recordEntry = (
  e: Pick<TimelineEntry, 'at' | 'source' | 'event' | 'detail'> & Partial<TimelineEntry>,
): TimelineEntry => ({ orderNo: null, state: null, jobId: null, attempt: null, code: null, ...e });

async function ledgerOfReceipts(db: Database, receiptRows: readonly ReceiptRow[]) {
  if (receiptRows.length === 0) return [];
  const ids = receiptRows.map((r) => r.id);
  return db.select().from(ledgerEntries).where(inArray(ledgerEntries.receiptId, ids)).orderBy(asc(ledgerEntries.id));
}

/**
 * Each distinct callback of a suspected forgery (a review occurrence whose code is one of FORGERY_CODES: it differed
 * from what was applied, or claimed what Get order contradicts), even when its review was already open from an earlier
 * one, or opened for another reason: one row each, with both values.
 */
async function differingOf(db: Database, reviewRows: readonly ReviewRow[]) {
  if (reviewRows.length === 0) return [];
  const ids = reviewRows.map((r) => r.id);
  return db
    .select()
    .from(reviewOccurrences)
    .where(and(inArray(reviewOccurrences.reviewId, ids), inArray(reviewOccurrences.reasonCode, [...FORGERY_CODES])))
    .orderBy(asc(reviewOccurrences.id));
}

/** Callbacks whose jobs are gone from the queue (a reviewed variant is released at once): what the worker recorded. */
function goneEntries(a: ArrivalRow): TimelineEntry[] {
  const base = { orderNo: a.orderNo, state: a.state, jobId: a.jobId, code: a.lastCode };
  const last =
    a.status === 'applied'
      ? `settled it: ${a.outcome ?? 'applied'}`
      : a.status === 'failed'
        ? 'failed for good'
        : `ended: ${a.status}`;
  return [
    {
      ...base,
      at: a.receivedAt.toISOString(),
      source: 'ingest',
      event: 'received',
      attempt: null,
      detail: `${a.kind} state ${a.state} acknowledged at ingest and queued as job ${a.jobId} (no longer on the queue)`,
      code: null,
    },
    {
      ...base,
      at: a.updatedAt.toISOString(),
      source: 'job',
      event: a.status === 'failed' ? 'job-failed' : 'attempt-settled',
      attempt: a.attempts,
      detail: `attempt ${a.attempts} ${last}${a.lastDetail ? `: ${a.lastDetail}` : ''}`.slice(0, 500),
    },
  ];
}

const receiptEntry = (r: ReceiptRow): TimelineEntry =>
  recordEntry({
    at: r.appliedAt.toISOString(),
    source: 'receipt',
    event: 'applied',
    orderNo: r.orderNo,
    state: r.state,
    jobId: r.jobId,
    detail: `Get order confirmed state ${r.state} and ${amountText(r.confirmedAmount)}; order ${r.outcome} (from ${r.source})`,
  });

function ledgerEntriesOf(
  receiptRows: readonly ReceiptRow[],
  ledgerRows: readonly (typeof ledgerEntries.$inferSelect)[],
): TimelineEntry[] {
  const byReceipt = new Map(receiptRows.map((r) => [r.id, r]));
  return ledgerRows.map((l) => {
    const receipt = byReceipt.get(l.receiptId);
    return recordEntry({
      at: l.createdAt.toISOString(),
      source: 'ledger',
      event: 'ledger-entry',
      orderNo: receipt?.orderNo ?? null,
      state: receipt?.state ?? null,
      jobId: receipt?.jobId ?? null,
      detail: `${l.entryType} ${amountText(l.amount)} ${l.currency}`,
    });
  });
}

function reviewEntries(r: ReviewRow): TimelineEntry[] {
  const ids = { orderNo: r.orderNo, state: r.state, code: r.reasonCode, source: 'review' as const };
  const opened = recordEntry({
    ...ids,
    at: r.createdAt.toISOString(),
    event: 'review-opened',
    detail: `review ${r.id} opened: ${r.reason}`,
  });
  if (!r.closedAt) return [opened];
  const closed = recordEntry({
    ...ids,
    at: r.closedAt.toISOString(),
    event: 'review-closed',
    detail: `review ${r.id} ${r.status}`,
  });
  return [opened, closed];
}

function differingEntries(
  reviewRows: readonly ReviewRow[],
  differing: readonly (typeof reviewOccurrences.$inferSelect)[],
): TimelineEntry[] {
  const reviewById = new Map(reviewRows.map((r) => [r.id, r]));
  return differing.map((o) => {
    const review = reviewById.get(o.reviewId);
    const applied = o.reasonCode === ErrorCodes.VERIFY_DIFFERS_FROM_APPLIED;
    return recordEntry({
      at: o.firstSeenAt.toISOString(),
      source: 'review',
      event: applied ? 'differs-from-applied' : 'contradicts-get-order',
      orderNo: review?.orderNo ?? null,
      state: review?.state ?? null,
      code: o.reasonCode,
      detail: `suspected forgery, nothing paid from it (review ${o.reviewId}, seen ${o.seen} time(s)): ${o.reason}`,
    });
  });
}

/** Each replay that sent one of these jobs back: who, when and why (its job failed for good before it). */
async function replayEntries(
  db: Database,
  jobIds: readonly string[],
  jobs: readonly FoundJob[],
): Promise<TimelineEntry[]> {
  if (jobIds.length === 0) return [];
  const sent = await db
    .select({
      jobId: replayJobs.jobId,
      sentAt: replayJobs.sentAt,
      replayId: replays.id,
      operator: replays.operator,
      reason: replays.reason,
    })
    .from(replayJobs)
    .innerJoin(replays, eq(replays.id, replayJobs.replayId))
    .where(inArray(replayJobs.jobId, [...jobIds]))
    .limit(100);
  const byId = new Map(jobs.map((j) => [j.job.id, j.job.data as { orderNo?: string; state?: number }]));
  return sent.map((r) => {
    const data = byId.get(r.jobId);
    const by = `replay ${r.replayId} of ${r.operator}`;
    return recordEntry({
      at: r.sentAt.toISOString(),
      source: 'replay',
      event: 'replayed',
      orderNo: data?.orderNo ?? null,
      state: data?.state ?? null,
      jobId: r.jobId,
      detail: `it had failed for good; sent back to the queue by ${by}: ${r.reason}`.slice(0, 500),
      operator: r.operator,
      reason: r.reason,
      link: `/replays/${r.replayId}`,
    });
  });
}

/** Outcomes the action's words already say. */
const QUIET_OUTCOMES = new Set(['done', 'replayed']);

/** What each audited action reads as on the order's story. */
const ACTION_WORDS: Record<string, string> = {
  'queue.retry': 'retried from the dashboard',
  'queue.promote': 'run now (promoted)',
  'reviews.reverify': 're-verified',
  'reviews.dismiss': 'dismissed',
};

/**
 * The people's actions on the order's jobs and reviews (a dashboard retry, "Replay this job", a re-verify, a
 * dismissal), from the audit by target: who, the reason, the outcome and a link to the audit row. Refusals are not
 * part of the order's story (the audit keeps them).
 */
async function operatorEntries(
  db: Database,
  jobIds: readonly string[],
  reviewRows: readonly (typeof reviews.$inferSelect)[],
  jobs: readonly FoundJob[],
): Promise<TimelineEntry[]> {
  const targets = [...jobIds.map((id) => `job:callbacks/${id}`), ...reviewRows.map((r) => `review:${r.id}`)];
  if (targets.length === 0) return [];
  const rows = await db
    .select()
    .from(operatorActions)
    .where(and(inArray(operatorActions.target, targets), ne(operatorActions.outcome, 'denied')))
    .orderBy(asc(operatorActions.id))
    .limit(200);
  const jobData = new Map(
    jobs.map((j) => [`job:callbacks/${j.job.id}`, j.job.data as { orderNo?: string; state?: number }]),
  );
  const reviewByTarget = new Map(reviewRows.map((r) => [`review:${r.id}`, r]));
  return rows.map((a) => {
    const review = reviewByTarget.get(a.target);
    const data = jobData.get(a.target);
    const jobId = a.target.startsWith('job:callbacks/') ? a.target.slice('job:callbacks/'.length) : null;
    const words =
      a.action === 'queue.retry' && a.details?.via === 'order-page'
        ? 'replayed from the order page'
        : (ACTION_WORDS[a.action] ?? a.action);
    const what = review ? `review ${review.id} ${words}` : `job ${words}`;
    const outcome = a.outcome === 'pending' ? 'outcome not recorded' : a.outcome;
    const how = QUIET_OUTCOMES.has(a.outcome) ? '' : ` (${outcome})`;
    return {
      at: a.at.toISOString(),
      source: 'operator',
      event: 'operator-action',
      orderNo: review?.orderNo ?? data?.orderNo ?? null,
      state: review?.state ?? data?.state ?? null,
      jobId,
      attempt: null,
      code: a.outcome.startsWith('failed:') ? a.outcome.slice('failed:'.length) : null,
      detail: `${what} by ${a.operator}${how}: ${a.reason}`.slice(0, 500),
      operator: a.operator,
      reason: a.reason,
      link: `/audit?target=${encodeURIComponent(a.target)}`,
    } satisfies TimelineEntry;
  });
}
