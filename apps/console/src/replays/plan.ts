/**
 * The dry run of a replay: what each failed job matching the filter would do to the ledger if it ran now. The
 * verdict is settlement's own (`decideEvent`, the decision the worker acts on) from the pair's receipt, our order and
 * Get order's answer (cached a minute per order, asked at most at CONSOLE_REPLAY_MAX_RATE); this file only words it.
 * Changes nothing.
 */
import { createHash } from 'node:crypto';
import type { Settled } from '@mcb/core/batcher';
import { callbackArrivals, type Database, type Order } from '@mcb/core/db';
import { AppError, ErrorCodes, coerceError, firstLineOf } from '@mcb/core/errors';
import type { PlatformClient, PlatformOrder } from '@mcb/core/platform';
import type { RedisClient } from '@mcb/core/redis';
import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import {
  createRateLimiter,
  decideAsking,
  lookUpEvent,
  waitedSince,
  waitsForUnknownOrder,
  type EventFacts,
  type RateLimiter,
  type Verdict,
} from '@mcb/settlement';
import type { Queue } from 'bullmq';
import { and, asc, gt, lte, sql } from 'drizzle-orm';
import { sumDecimals } from '@mcb/core/money';
import { z } from 'zod';
import { filterWhere, listOf, type CallbackFilter, type ScopedFilter } from '../callbacks/queries.ts';
import type { MerchantQueue, MerchantQueues } from '../callbacks/merchant-queues.ts';
import { unknownOrderCapPreview, type UnknownOrderCapPreview } from './unknown-order-cap-preview.ts';
import { amountText } from '../web/format.ts';

export const PLAN_CLASSES = [
  'alreadyApplied',
  'willApply',
  'willReview',
  'stillPending',
  'willFailAgain',
  'notReplayable',
] as const;
export type PlanClass = (typeof PLAN_CLASSES)[number];

export const planSampleSchema = z.object({
  jobId: z.string(),
  orderNo: z.string(),
  merchantOrderNo: z.string(),
  kind: z.enum(['payin', 'payout']),
  amount: z.string().nullable(),
  code: z.string().nullable().describe('Why it lands in its class (a verify or platform code), if not willApply'),
  detail: z.string(),
});
export type PlanSample = z.output<typeof planSampleSchema>;

/** What the jobs of one class would do to one kind of order, in one currency: how many and how much. */
export const planTotalSchema = z.object({
  cls: z.enum(PLAN_CLASSES),
  kind: z.enum(['payin', 'payout']),
  /** credited, succeeded or refused: the order's status after the event applies; null when our order is not known. */
  target: z.enum(['credited', 'succeeded', 'refused']).nullable(),
  currency: z.string().nullable().describe("Our order's currency; null when no order of ours has the number"),
  orders: z.number().int().describe('Distinct orders: two failed jobs of one order (pay-in states 3 and 6) count once'),
  amount: z.string().describe("The sum of our orders' amounts, each order's once (exact decimal text)"),
});
export type PlanTotal = z.output<typeof planTotalSchema>;

/**
 * The set a dry run classified, which the start posts back and the replay then acts on alone: the failed jobs
 * matching the filter whose last report is at or before `asOf` and whose id is at most `upToJobId`. A job that fails
 * later (before the start, or during the replay) is outside it.
 */
export const planBoundSchema = z.object({
  asOf: z.iso.datetime().describe('The newest failure report among the jobs classified (ms), or when it ran'),
  upToJobId: z.string().nullable().describe('The highest job id classified (jobs go in job-id order); null for none'),
  jobs: z.number().int().min(0).describe('Jobs classified'),
  digest: z.string().describe("SHA-256 of the classified jobs' ids: the start checks the set is still this one"),
});
export type PlanBound = z.output<typeof planBoundSchema>;

export const replayPlanSchema = z.object({
  matched: z.number().int().describe('Failed jobs matching the filter'),
  classified: z.number().int().describe('Of those, classified (the first 2,000 by job id; the rest are not)'),
  counts: z.object(
    Object.fromEntries(PLAN_CLASSES.map((c) => [c, z.number().int()])) as Record<PlanClass, z.ZodNumber>,
  ),
  samples: z.object(
    Object.fromEntries(PLAN_CLASSES.map((c) => [c, z.array(planSampleSchema)])) as Record<
      PlanClass,
      z.ZodArray<typeof planSampleSchema>
    >,
  ),
  totals: z
    .array(planTotalSchema)
    .describe('Orders and money per class, kind, outcome and currency: "will credit 41 orders, 36790 INR"'),
  bound: planBoundSchema.describe('What was classified: post it back with the start, which acts on that set only'),
});
export type ReplayPlan = z.output<typeof replayPlanSchema>;

/** Jobs a dry run classifies at most (each may cost a Get order). */
export const PLAN_LIMIT = 2000;
const SAMPLES = 10;
const CACHE_MS = 60_000;

/** Get order answers kept a minute, so a dry run followed by another (or by the start) does not ask twice. */
export interface GetOrderCache {
  get(merchantOrderNo: string, ask: () => Promise<PlatformOrder>): Promise<PlatformOrder>;
}

export function createGetOrderCache(now: () => number = Date.now): GetOrderCache {
  const answers = new Map<string, { at: number; answer: PlatformOrder }>();
  return {
    async get(merchantOrderNo, ask) {
      const hit = answers.get(merchantOrderNo);
      if (hit && now() - hit.at < CACHE_MS) return hit.answer;
      const answer = await ask();
      if (answers.size > 10_000) answers.clear(); // bounded: a burst of dry runs cannot grow it without end
      answers.set(merchantOrderNo, { at: now(), answer });
      return answer;
    },
  };
}

export interface PlanDeps {
  db: Database;
  /** Every merchant's callbacks queue: a dry run reads the filter's merchant's only. */
  queues: MerchantQueues;
  platform: PlatformClient;
  /**
   * The platform client of the merchant whose number a job carries (each merchant asks its own platform with its own
   * number); undefined or no answer: `platform`.
   */
  platformFor?: (merchantNo: string) => PlatformClient | undefined;
  cache: GetOrderCache;
  /** Get order requests per second (CONSOLE_REPLAY_MAX_RATE). */
  maxRate: number;
  /** The worker's ORDER_GRACE_PERIOD, in ms. @defaultValue settlement's (15 minutes) */
  orderGracePeriodMs?: number;
  /** The worker's CONFIRM_MAX_WAIT, in ms. @defaultValue settlement's (2 hours) */
  confirmMaxWaitMs?: number;
  /** The worker's WORKER_MAX_UNKNOWN_WAITING (0: no cap). @defaultValue the worker's (10000) */
  maxUnknownWaiting?: number;
  /** Where the worker keeps its unknown-order cap; without it the dry run assumes the cap has room. */
  redis?: RedisClient | undefined;
}

/**
 * The merchant a replay by `filter` acts on, and the filter scoped to its number: `filter.merchant`, required when
 * the console serves several (400 otherwise); with one merchant, its rows are every row.
 */
export function replayScope(
  queues: MerchantQueues,
  filter: CallbackFilter,
): { mq: MerchantQueue; scoped: ScopedFilter } {
  const mq = queues.of(filter.merchant, 'filter.merchant');
  return { mq, scoped: { ...filter, merchantNo: queues.several ? mq.merchantNo : undefined } };
}

/** The filter of a replay: the search's, on failed jobs only (a replay re-runs jobs that failed for good). */
export function replayWhere(filter: ScopedFilter) {
  const other = listOf(filter.status).filter((s) => s !== 'failed');
  if (other.length > 0) {
    throw new AppError(
      ErrorCodes.REQUEST_INVALID,
      `a replay re-runs jobs that failed for good: filter.status must be "failed" or left out (got "${other.join(', ')}")`,
      {
        details: { errors: [{ field: 'filter.status', message: 'must be failed or unset' }] },
      },
    );
  }
  return and(filterWhere({ ...filter, status: 'failed' }));
}

/** The rows of a replay's set: none reported after `asOf` (to the ms, as the worker stamps them), none above `upTo`. */
export function boundWhere(bound: { asOf: Date | string | null; upTo: string | null } | undefined) {
  if (!bound) return undefined;
  const t = callbackArrivals;
  return and(
    bound.asOf === null
      ? undefined
      : sql`date_trunc('milliseconds', ${t.updatedAt}) <= ${new Date(bound.asOf).toISOString()}::timestamptz`,
    bound.upTo === null ? undefined : lte(t.jobId, bound.upTo),
  );
}

/** How a replay's set is bounded, as the replays table keeps it. */
export type SetBound = Parameters<typeof boundWhere>[0];

/** Failed jobs matching `filter` (within `bound`, when given), in job-id order after `cursor`. */
export async function replayCandidates(
  db: Database,
  filter: ScopedFilter,
  after: string | null,
  limit: number,
  bound?: SetBound,
) {
  const t = callbackArrivals;
  return db
    .select({
      jobId: t.jobId,
      merchantNo: t.merchantNo,
      updatedAt: t.updatedAt,
      orderNo: t.orderNo,
      state: t.state,
      merchantOrderNo: t.merchantOrderNo,
      kind: t.kind,
      amount: t.amount,
    })
    .from(t)
    .where(and(replayWhere(filter), boundWhere(bound), after === null ? undefined : gt(t.jobId, after)))
    .orderBy(asc(t.jobId))
    .limit(limit);
}

export async function countCandidates(db: Database, filter: ScopedFilter, bound?: SetBound): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(callbackArrivals)
    .where(and(replayWhere(filter), boundWhere(bound)));
  return row?.n ?? 0;
}

/** The bound of `rows` (a set read in job-id order): its newest report, its highest id, its size and its digest. */
export async function boundOf(db: Database, rows: readonly { jobId: string; updatedAt: Date }[]): Promise<PlanBound> {
  let newest = rows[0]?.updatedAt;
  for (const r of rows) if (r.updatedAt > newest!) newest = r.updatedAt;
  // No job: the set is "what had failed by now", by Postgres's clock.
  const asOf = newest ?? (await db.execute<{ now: Date }>(sql`select now() as now`)).rows[0]!.now;
  return {
    asOf: new Date(asOf).toISOString(),
    upToJobId: rows.at(-1)?.jobId ?? null,
    jobs: rows.length,
    digest: digestOf(rows),
  };
}

/** SHA-256 of the jobs' ids in order: the same set gives the same digest. */
export function digestOf(rows: readonly { jobId: string }[]): string {
  const hash = createHash('sha256');
  for (const r of rows) hash.update(r.jobId).update('\n');
  return hash.digest('hex');
}

type Candidate = Awaited<ReturnType<typeof replayCandidates>>[number];
/** A job's line in the preview: its class, why, and our order with the status the event gives it (when known). */
type Preview = { cls: PlanClass; code: string | null; detail: string; order?: Order; target?: PlanTotal['target'] };

/** Classify every failed job matching `filter` (up to {@link PLAN_LIMIT}), of the filter's merchant only. */
export async function planReplay(deps: PlanDeps, unscoped: CallbackFilter): Promise<ReplayPlan> {
  const { mq, scoped: filter } = replayScope(deps.queues, unscoped);
  const matched = await countCandidates(deps.db, filter);
  const candidates = await replayCandidates(deps.db, filter, null, PLAN_LIMIT);
  const limiter = createRateLimiter(deps.maxRate);
  const plan: ReplayPlan = {
    matched,
    classified: candidates.length,
    counts: Object.fromEntries(PLAN_CLASSES.map((c) => [c, 0])) as Record<PlanClass, number>,
    samples: Object.fromEntries(PLAN_CLASSES.map((c) => [c, []])) as unknown as Record<PlanClass, PlanSample[]>,
    totals: [],
    bound: await boundOf(deps.db, candidates),
  };
  // Per class, kind, outcome and currency: each order once, with its amount (two jobs of one order credit it once).
  const sums = new Map<string, { total: Omit<PlanTotal, 'amount' | 'orders'>; amounts: Map<string, string | null> }>();
  const cap = await unknownOrderCapPreview({ ...deps, key: mq.unknownOrderWaiting });
  // A few at a time: Get order is the slow part, and the limiter spaces its requests.
  const queue = [...candidates];
  const work = async () => {
    for (let c = queue.shift(); c; c = queue.shift()) {
      const v = await classify(deps, mq.queue, c, { limiter, cap }).catch((e: unknown): Preview => ({
        cls: 'stillPending',
        code: 'ERROR',
        detail: firstLineOf(coerceError(e)),
      }));
      plan.counts[v.cls]++;
      const total = { cls: v.cls, kind: c.kind, target: v.target ?? null, currency: v.order?.currency ?? null };
      const key = JSON.stringify(total);
      const sum = sums.get(key) ?? sums.set(key, { total, amounts: new Map() }).get(key)!;
      sum.amounts.set(v.order ? `#${v.order.id}` : c.merchantOrderNo, v.order?.amount ?? null);
      const samples = plan.samples[v.cls];
      if (samples.length < SAMPLES)
        samples.push({
          jobId: c.jobId,
          orderNo: c.orderNo,
          merchantOrderNo: c.merchantOrderNo,
          kind: c.kind,
          amount: c.amount,
          code: v.code,
          detail: v.detail,
        });
    }
  };
  await Promise.all(Array.from({ length: 8 }, work));
  for (const c of PLAN_CLASSES) plan.samples[c].sort((a, b) => a.jobId.localeCompare(b.jobId));
  plan.totals = [...sums.values()]
    .map(({ total, amounts }) => ({
      ...total,
      orders: amounts.size,
      amount: sumDecimals([...amounts.values()].filter((a) => a !== null)),
    }))
    .sort(
      (a, b) =>
        PLAN_CLASSES.indexOf(a.cls) - PLAN_CLASSES.indexOf(b.cls) ||
        a.kind.localeCompare(b.kind) ||
        String(a.currency).localeCompare(String(b.currency)),
    );
  return plan;
}

/**
 * What replaying this job now would do, as settlement decides it for the worker on the replay's first attempt; the
 * queue's own checks first.
 */
async function classify(
  deps: PlanDeps,
  queue: Queue,
  c: Candidate,
  ask: { limiter: RateLimiter; cap: UnknownOrderCapPreview },
): Promise<Preview> {
  const job = await queue.getJob(c.jobId);
  if (!job)
    return { cls: 'notReplayable', code: null, detail: 'no longer in the queue (failed jobs are kept 30 days)' };
  const state = await job.getState();
  if (state !== 'failed') return { cls: 'notReplayable', code: null, detail: `the job is ${state} now, not failed` };
  const parsed = callbackJobSchema.safeParse(job.data);
  if (!parsed.success)
    return {
      cls: 'notReplayable',
      code: ErrorCodes.JOB_PAYLOAD_INVALID,
      detail: 'the job payload is not a callback event',
    };
  const event = parsed.data;
  // A replayed job runs with a fresh retry budget: it may still wait, within the bounds counted from its arrival,
  // unless its first attempt is its last (CALLBACK_JOB_ATTEMPTS=1), which the worker decides now (noWait).
  const facts: EventFacts = {
    found: await lookUpEvent(deps.db, event),
    waitedMs: waitedSince(event, Date.now()),
    orderGracePeriodMs: deps.orderGracePeriodMs,
    confirmMaxWaitMs: deps.confirmMaxWaitMs,
    noWait: (job.opts.attempts ?? 1) <= 1,
  };
  const getOrder = () => askGetOrder(deps, event, ask.limiter);
  const v = await decideAsking(event, facts, getOrder);
  // The worker's unknown-order cap, asked as the worker asks it: only for an event that would wait for its order.
  if (!waitsForUnknownOrder(v) || !(await ask.cap.full(c.jobId))) return previewOf(event, v);
  return previewOf(event, await decideAsking(event, { ...facts, unknownOrderCapFull: true }, getOrder));
}

/** Get order's answer for the event's order, from the cache or at the dry run's rate; never throws. */
async function askGetOrder(deps: PlanDeps, event: CallbackJob, limiter: RateLimiter): Promise<Settled<PlatformOrder>> {
  try {
    // Keyed by merchant too: two merchants may use the same merchant order number.
    const platform = deps.platformFor?.(event.merchantNo) ?? deps.platform;
    const value = await deps.cache.get(`${event.merchantNo}/${event.merchantOrderNo}`, async () => {
      await limiter.take();
      return platform.getOrder(event.merchantOrderNo);
    });
    return { ok: true, value };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The verdict in the preview's words: its class, its code and a sentence, and our order when the verdict names it. */
function previewOf(event: CallbackJob, v: Verdict): Preview {
  const ours = v.ours ? { order: v.ours.order, target: v.ours.target } : {};
  switch (v.verdict) {
    case 'apply': {
      const effect = event.kind === 'payin' ? 'credit' : 'finalise';
      const confirms = `Get order confirms state ${v.confirmed.state} and ${amountText(v.confirmed.amount)}`;
      return { cls: 'willApply', code: null, detail: `${confirms}: it would ${effect} the order`, ...ours };
    }
    case 'duplicate':
      return {
        cls: 'alreadyApplied',
        code: null,
        detail:
          v.reason === 'receipt-exists'
            ? `receipt ${v.receiptId} exists: replaying is a no-op`
            : `order already ${v.ours.order.status}`,
        ...ours,
      };
    case 'applied':
      return {
        cls: 'alreadyApplied',
        code: null,
        detail: `receipt ${v.receipt.id} exists: replaying is a no-op`,
        ...ours,
      };
    case 'review':
      return { cls: 'willReview', code: v.finding.code, detail: v.finding.reason, ...ours };
    case 'wait':
      return { cls: 'stillPending', code: v.finding.code, detail: v.finding.reason, ...ours };
    case 'retry': {
      const err = coerceError(v.error);
      const code = err instanceof AppError ? err.code : ErrorCodes.PLATFORM_ERROR_CODE;
      const detail = `Get order did not confirm: ${firstLineOf(err)}`;
      // No attempt follows (its only attempt, or an error no retry fixes): the job fails again at once.
      if (v.final) return { cls: 'willFailAgain', code, detail: `${detail}: it fails again`, ...ours };
      return { cls: 'stillPending', code, detail, ...ours };
    }
    case 'invalid':
      return { cls: 'notReplayable', code: v.finding.code, detail: `${v.finding.reason}: a replay fails again` };
    case 'confirm':
      return { cls: 'stillPending', code: null, detail: 'Get order was not asked', ...ours };
  }
}
