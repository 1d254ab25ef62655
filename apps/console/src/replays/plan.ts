/**
 * The dry run of a replay: what each failed job matching the filter would do to the ledger if it ran now, decided
 * by settlement's own checks (checkOwnOrder, verifyConfirmation, targetStatus) against our order, its receipt and
 * Get order's answer (cached a minute per order, asked at most at CONSOLE_REPLAY_MAX_RATE). Changes nothing.
 */
import { callbackArrivals, callbackReceipts, orders, type Database, type Order } from '@mcb/core/db';
import { AppError, ErrorCodes, coerceError, firstLineOf } from '@mcb/core/errors';
import type { PlatformClient, PlatformOrder } from '@mcb/core/platform';
import { callbackJobSchema, type CallbackJob } from '@mcb/core/queue';
import { checkOwnOrder, createRateLimiter, targetStatus, verifyConfirmation } from '@mcb/settlement';
import type { Queue } from 'bullmq';
import { and, asc, eq, gt, sql } from 'drizzle-orm';
import { sumDecimals } from '@mcb/core/money';
import { z } from 'zod';
import { filterWhere, listOf, type CallbackFilter } from '../callbacks/queries.ts';

export const PLAN_CLASSES = ['alreadyApplied', 'willApply', 'willReview', 'stillPending', 'notReplayable'] as const;
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
  orders: z.number().int(),
  amount: z.string().describe("The sum of our orders' amounts (exact decimal text)"),
});
export type PlanTotal = z.output<typeof planTotalSchema>;

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
  queue: Queue;
  platform: PlatformClient;
  cache: GetOrderCache;
  /** Get order requests per second (CONSOLE_REPLAY_MAX_RATE). */
  maxRate: number;
}

/** The filter of a replay: the search's, on failed jobs only (a replay re-runs jobs that failed for good). */
export function replayWhere(filter: CallbackFilter) {
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

/** Failed jobs matching `filter`, in job-id order after `cursor`. */
export async function replayCandidates(db: Database, filter: CallbackFilter, after: string | null, limit: number) {
  const t = callbackArrivals;
  return db
    .select({
      jobId: t.jobId,
      orderNo: t.orderNo,
      state: t.state,
      merchantOrderNo: t.merchantOrderNo,
      kind: t.kind,
      amount: t.amount,
    })
    .from(t)
    .where(and(replayWhere(filter), after === null ? undefined : gt(t.jobId, after)))
    .orderBy(asc(t.jobId))
    .limit(limit);
}

export async function countCandidates(db: Database, filter: CallbackFilter): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(callbackArrivals)
    .where(replayWhere(filter));
  return row?.n ?? 0;
}

type Candidate = Awaited<ReturnType<typeof replayCandidates>>[number];
type Verdict = { cls: PlanClass; code: string | null; detail: string; order?: Order; target?: PlanTotal['target'] };

/** Classify every failed job matching `filter` (up to {@link PLAN_LIMIT}). */
export async function planReplay(deps: PlanDeps, filter: CallbackFilter): Promise<ReplayPlan> {
  const matched = await countCandidates(deps.db, filter);
  const candidates = await replayCandidates(deps.db, filter, null, PLAN_LIMIT);
  const limiter = createRateLimiter(deps.maxRate);
  const plan: ReplayPlan = {
    matched,
    classified: candidates.length,
    counts: Object.fromEntries(PLAN_CLASSES.map((c) => [c, 0])) as Record<PlanClass, number>,
    samples: Object.fromEntries(PLAN_CLASSES.map((c) => [c, []])) as unknown as Record<PlanClass, PlanSample[]>,
    totals: [],
  };
  const sums = new Map<string, { total: Omit<PlanTotal, 'amount'>; amounts: string[] }>();
  // A few at a time: Get order is the slow part, and the limiter spaces its requests.
  const queue = [...candidates];
  const work = async () => {
    for (let c = queue.shift(); c; c = queue.shift()) {
      const v = await classify(deps, c, limiter).catch((e: unknown): Verdict => ({
        cls: 'stillPending',
        code: 'ERROR',
        detail: firstLineOf(coerceError(e)),
      }));
      plan.counts[v.cls]++;
      const total = { cls: v.cls, kind: c.kind, target: v.target ?? null, currency: v.order?.currency ?? null };
      const key = JSON.stringify(total);
      const sum = sums.get(key) ?? sums.set(key, { total: { ...total, orders: 0 }, amounts: [] }).get(key)!;
      sum.total.orders++;
      if (v.order) sum.amounts.push(v.order.amount);
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
    .map(({ total, amounts }) => ({ ...total, amount: sumDecimals(amounts) }))
    .sort(
      (a, b) =>
        PLAN_CLASSES.indexOf(a.cls) - PLAN_CLASSES.indexOf(b.cls) ||
        a.kind.localeCompare(b.kind) ||
        String(a.currency).localeCompare(String(b.currency)),
    );
  return plan;
}

async function classify(deps: PlanDeps, c: Candidate, limiter: ReturnType<typeof createRateLimiter>): Promise<Verdict> {
  const job = await deps.queue.getJob(c.jobId);
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
  const target = targetStatus(event);
  if (!target)
    return {
      cls: 'willReview',
      code: ErrorCodes.JOB_PAYLOAD_INVALID,
      detail: `state ${event.state} is not a final ${event.kind} state`,
    };

  const [receipt] = await deps.db
    .select({ id: callbackReceipts.id })
    .from(callbackReceipts)
    .where(and(eq(callbackReceipts.orderNo, event.orderNo), eq(callbackReceipts.state, event.state)));
  if (receipt)
    return { cls: 'alreadyApplied', code: null, detail: `receipt ${receipt.id} exists: replaying is a no-op` };
  const [order] = await deps.db.select().from(orders).where(eq(orders.merchantOrderNo, event.merchantOrderNo));
  if (!order)
    return {
      cls: 'willReview',
      code: ErrorCodes.VERIFY_ORDER_UNKNOWN,
      detail: `no order of ours has merchant order number ${event.merchantOrderNo}`,
    };
  const ours = (v: Verdict): Verdict => ({ ...v, order, target });
  const own = checkOwnOrder(event, order);
  if (own) return ours({ cls: 'willReview', code: own.code, detail: own.reason });
  if (order.status === target && order.platformOrderNo === event.orderNo)
    return ours({ cls: 'alreadyApplied', code: null, detail: `order already ${order.status}` });
  if (order.status !== 'pending')
    return ours({
      cls: 'willReview',
      code: ErrorCodes.VERIFY_CONFLICTING_FINAL_STATE,
      detail: `our order is already ${order.status}; the event would make it ${target}`,
    });
  return ours(verdictOf(event, order, await askGetOrder(deps, event, limiter)));
}

async function askGetOrder(
  deps: PlanDeps,
  event: CallbackJob,
  limiter: ReturnType<typeof createRateLimiter>,
): Promise<PlatformOrder | Verdict> {
  try {
    return await deps.cache.get(event.merchantOrderNo, async () => {
      await limiter.take();
      return deps.platform.getOrder(event.merchantOrderNo);
    });
  } catch (e) {
    const err = coerceError(e);
    const code = err instanceof AppError ? err.code : ErrorCodes.PLATFORM_ERROR_CODE;
    return { cls: 'stillPending', code, detail: `Get order did not confirm: ${firstLineOf(err)}` };
  }
}

function verdictOf(event: CallbackJob, order: Order, answer: PlatformOrder | Verdict): Verdict {
  if ('cls' in answer) return answer;
  const problem = verifyConfirmation(event, order, answer);
  if (!problem)
    return {
      cls: 'willApply',
      code: null,
      detail: `Get order confirms state ${answer.state} and ${answer.amount}: it would ${event.kind === 'payin' ? 'credit' : 'finalise'} the order`,
    };
  return problem.retry
    ? { cls: 'stillPending', code: problem.code, detail: problem.reason }
    : { cls: 'willReview', code: problem.code, detail: problem.reason };
}
