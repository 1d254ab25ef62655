/**
 * Each merchant's figures (issue 51: the merchants page, `GET /api/merchants`, `pnpm cli merchants list`, the landing
 * page's lines): one function, {@link merchantFigures}, over the merchants it is given (a caller that scopes what an
 * operator sees passes fewer). What cannot be known (Redis away, no worker reporting) is null, never a guess.
 */
import type { Merchant } from '@mcb/core/config';
import { merchantPauses, type Database } from '@mcb/core/db';
import { readFleetState } from '@mcb/core/platform';
import { merchantKeys } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';
import type { Queue } from 'bullmq';
import { inArray, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { MerchantQueues } from '../callbacks/merchant-queues.ts';
import { iso } from '../web/format.ts';
import { attentionOf } from './attention.ts';
import { NO_LANE_FIGURES, readLaneFigures } from './lane-figures.ts';

/** What {@link merchantFigures} reads. */
export interface MerchantFiguresDeps {
  db: Database;
  /** Every merchant's callbacks queue; without it the queue's figures are null. */
  queues?: MerchantQueues;
  /** The queues' Redis (the workers' snapshots, the fleet's breaker); without it those figures are null. */
  redis?: RedisClient;
  /** QUEUE_PREFIX (the merchants' keys). */
  queuePrefix: string;
  /** PLATFORM_MAX_RPS: a merchant's Get order budget when it names none. */
  defaultGetOrderRps: number;
  /** @defaultValue Date.now */
  now?: () => number;
}

const count = z.number().int().nonnegative().nullable();

/** One merchant's figures: the API's response row and the page's view model. */
export const merchantFiguresSchema = z.object({
  ref: z.string(),
  merchantNo: z.string(),
  weight: z.number(),
  paused: z.object({ by: z.string(), reason: z.string(), since: z.string() }).nullable(),
  waiting: count.describe('Jobs waiting in its queue (waiting and prioritized)'),
  delayed: count.describe('Jobs delayed (retries waiting their backoff)'),
  failed: count.describe('Jobs failed for good, still in the queue'),
  active: count.describe('Jobs in flight'),
  oldestWaitingSince: z.string().nullable().describe("When the oldest waiting job's callback was received"),
  creditsLastMinute: count.describe('Callbacks applied (credited, paid out or refused) in the last 60 s'),
  creditsLastHour: count,
  receivedLast10Minutes: count.describe('Callbacks a worker took in the last 10 minutes, by their receipt'),
  creditsLast10Minutes: count,
  creditP99Ms: z.number().int().nullable().describe('Callback-to-credit p99 over the last hour, in ms'),
  getOrderP99Ms: z.number().nullable().describe("The highest of the live workers' Get order p99 (last seconds), in ms"),
  getOrderErrorRate: z.number().nullable().describe('Outage-like Get order failures per call, 0..1'),
  breaker: z.enum(['closed', 'half-open', 'open']).nullable(),
  getOrderRps: z.number().describe('Its Get order budget, requests per second for the fleet (0: none)'),
  getOrderRate: z.number().nullable().describe('Get order calls per second now, all workers'),
  budgetUse: z.number().nullable().describe('getOrderRate / getOrderRps (null without a budget)'),
  workers: count.describe('Worker processes whose lane reported in the last 3 intervals'),
  attention: z.array(z.string()).describe('Why a person should look, one line each; empty when all is well'),
});
export type MerchantFigures = z.infer<typeof merchantFiguresSchema>;

export const merchantsListSchema = z.object({ merchants: z.array(merchantFiguresSchema) });

/** The figures of `merchants`, in the order given. */
export async function merchantFigures(
  deps: MerchantFiguresDeps,
  merchants: readonly Merchant[],
): Promise<MerchantFigures[]> {
  if (merchants.length === 0) return [];
  const now = deps.now?.() ?? Date.now();
  const nos = merchants.map((m) => m.merchantNo);
  const [pauses, credits, perMerchant] = await Promise.all([
    deps.db.select().from(merchantPauses).where(inArray(merchantPauses.merchantNo, nos)),
    creditFigures(deps.db, nos, now),
    Promise.all(merchants.map((m) => liveFigures(deps, m))),
  ]);
  return merchants.map((m, i) => {
    const pause = pauses.find((p) => p.merchantNo === m.merchantNo);
    const c = credits.get(m.merchantNo);
    const live = perMerchant[i]!;
    const getOrderRps = m.getOrderRps ?? deps.defaultGetOrderRps;
    const figures: MerchantFigures = {
      ref: m.ref,
      merchantNo: m.merchantNo,
      weight: m.weight,
      paused: pause ? { by: pause.pausedBy, reason: pause.reason, since: iso(pause.since) } : null,
      ...live.queue,
      creditsLastMinute: c?.minute ?? 0,
      creditsLastHour: c?.hour ?? 0,
      receivedLast10Minutes: c?.received10 ?? 0,
      creditsLast10Minutes: c?.credited10 ?? 0,
      creditP99Ms: c?.p99 ?? null,
      getOrderP99Ms: live.lane.getOrderP99Ms,
      getOrderErrorRate: live.lane.getOrderErrorRate,
      breaker: live.breaker,
      getOrderRps,
      getOrderRate: live.lane.getOrderRate,
      budgetUse: live.lane.getOrderRate !== null && getOrderRps > 0 ? live.lane.getOrderRate / getOrderRps : null,
      workers: deps.redis ? live.lane.workers : null,
      attention: [],
    };
    figures.attention = attentionOf(figures, now);
    return figures;
  });
}

type CreditRow = {
  merchant_no: string;
  minute: number;
  hour: number;
  received10: number;
  credited10: number;
  p99: number | null;
};

/**
 * Credits in the last minute and hour, callbacks received and credited in the last 10 minutes, and the last hour's
 * callback-to-credit p99, per merchant (callback_arrivals; a credit counts when its callback arrived at most 25 hours
 * before). Every row it counts was reported in the last hour (`updated_at`; a callback received in the last 10
 * minutes was taken by a worker after that, so its row's report is younger still), which is what it reads:
 * callback_arrivals_merchant_updated_idx over an hour, not the day of arrivals a credit may come from.
 */
async function creditFigures(db: Database, nos: readonly string[], now: number): Promise<Map<string, CreditRow>> {
  const at = new Date(now).toISOString();
  const r = await db.execute<CreditRow>(sql`
    select a.merchant_no,
           count(*) filter (where a.status = 'applied' and a.updated_at > ${at}::timestamptz - interval '1 minute')::int
             as minute,
           count(*) filter (where a.status = 'applied' and a.updated_at > ${at}::timestamptz - interval '1 hour')::int
             as hour,
           count(*) filter (where a.received_at > ${at}::timestamptz - interval '10 minutes')::int as received10,
           count(*) filter (where a.status = 'applied'
                              and a.updated_at > ${at}::timestamptz - interval '10 minutes')::int as credited10,
           round(percentile_disc(0.99) within group (order by extract(epoch from a.updated_at - a.received_at) * 1000)
             filter (where a.status = 'applied' and a.updated_at > ${at}::timestamptz - interval '1 hour'))::int as p99
      from callback_arrivals a
     where a.merchant_no = any(array(select jsonb_array_elements_text(${JSON.stringify(nos)}::jsonb)))
       and a.updated_at > ${at}::timestamptz - interval '1 hour'
       and a.received_at > ${at}::timestamptz - interval '25 hours'
     group by a.merchant_no`);
  return new Map(r.rows.map((row) => [row.merchant_no, row]));
}

type QueueFigures = Pick<MerchantFigures, 'waiting' | 'delayed' | 'failed' | 'active' | 'oldestWaitingSince'>;
const NO_QUEUE: QueueFigures = { waiting: null, delayed: null, failed: null, active: null, oldestWaitingSince: null };

/** What Redis says of one merchant: its queue's counts, its workers' snapshots, and the fleet's breaker. */
async function liveFigures(deps: MerchantFiguresDeps, merchant: Merchant) {
  const keys = merchantKeys(deps.queuePrefix, merchant.ref);
  const queue = deps.queues?.list.find((q) => q.merchantNo === merchant.merchantNo)?.queue;
  const [counts, lane, fleet] = await Promise.all([
    queue ? queueFigures(queue).catch(() => NO_QUEUE) : NO_QUEUE,
    deps.redis ? readLaneFigures(deps.redis, keys.laneSnapshots).catch(() => NO_LANE_FIGURES) : NO_LANE_FIGURES,
    deps.redis ? readFleetState(deps.redis, keys.fleet).catch(() => undefined) : undefined,
  ]);
  // The fleet's shared breaker (Redis) is the truth when it is open; a process's own may be half-open, probing.
  const breaker = fleet?.breakerOpen ? 'open' : (lane.breaker ?? (fleet ? 'closed' : null));
  return { queue: counts, lane, breaker } as const;
}

/** Its queue's counts (a few LLEN/ZCARD) and its oldest waiting job (the far end of the wait list). */
async function queueFigures(queue: Queue): Promise<QueueFigures> {
  const [c, oldest] = await Promise.all([
    queue.getJobCounts('wait', 'prioritized', 'delayed', 'failed', 'active'),
    queue.getJobs(['wait'], 0, 0, true),
  ]);
  const first = oldest[0];
  const received = (first?.data as { receivedAt?: unknown } | undefined)?.receivedAt;
  const since = typeof received === 'string' ? received : first ? iso(first.timestamp) : null;
  return {
    waiting: (c.wait ?? 0) + (c.prioritized ?? 0),
    delayed: c.delayed ?? 0,
    failed: c.failed ?? 0,
    active: c.active ?? 0,
    oldestWaitingSince: since,
  };
}
