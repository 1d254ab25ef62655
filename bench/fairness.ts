/**
 * Fairness between merchants (issue 50): three merchants of one deployment on the bench's platform doubles
 * (`@mcb/testkit`'s, one each, each in a process of its own as each merchant's platform is a server of its own:
 * lib/platform-process.ts). A floods its backlog of pay-ins (plus 10 % duplicates) with Get order at 1,000 ms; B
 * and C send 20 callbacks a second each with Get order at 50 ms. Worker processes (`apps/worker/src/main.ts`, two
 * by default) run a lane per merchant (MERCHANTS_FILE). Callbacks go straight onto each merchant's queue as ingest
 * enqueues them (no ingest process: its routes per merchant are another change), so callback-to-credit runs from
 * the enqueue to `callback_receipts.applied_at`.
 *
 * Rows: each merchant solo, the three together, together while A's platform answers 503 for a while, and today's
 * single queue (one merchant: B's orders as orders of the same merchant behind A's flood).
 */
import { merchantKeys } from '@mcb/core/queue';
import { Redis } from 'ioredis';
import pg from 'pg';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { insertPendingPayins, truncateAll } from './lib/database.ts';
import { trackPostgresCpu } from './lib/cpu-breakdown.ts';
import { cpuSecondsOf, treeCpuSeconds } from './lib/proc.ts';
import { BENCH_AMOUNT, merchantFeed, type BenchMerchant, type MerchantFeed } from './lib/merchant-feed.ts';
import { startPlatformProcess, type PlatformProcess } from './lib/platform-process.ts';
import { progress, sleep } from './lib/progress.ts';
import type { BenchRedis } from './lib/redis-server.ts';
import { summarize, type LatencySummary } from './lib/stats.ts';
import { startWorker } from './lib/worker-process.ts';

export interface FairnessOptions {
  redis: BenchRedis;
  databaseUrl: string;
  /** A's backlog of distinct pay-ins. */
  flood: number;
  /** B's and C's callbacks per second, each. */
  rate: number;
  aDelayMs: number;
  bcDelayMs: number;
  /** A's own Get order budget (getOrderRps), requests per second across every worker. */
  aRps: number;
  /** B's and C's budget. */
  bcRps: number;
  workers: number;
  /** How long B and C send when alone. */
  soloSeconds: number;
  /** How long A's platform answers 503 in the outage row, from the start of the flood. */
  outageSeconds: number;
  /** A's backlog in the single-queue row. */
  baseline: number;
  logLevel: string;
  /** Run only these rows. @defaultValue every row */
  rows?: RowKind[];
}

/** One merchant's figures in one row. */
export interface MerchantFigures {
  ref: string;
  sent: number;
  credited: number;
  /** Credits per second from its first send to its last credit. */
  creditsPerSecond: number;
  callbackToCreditMs: LatencySummary;
}

/** Which row: each merchant alone, all three, all three with A's platform down, and today's single queue. */
export type RowKind = 'a-solo' | 'b-solo' | 'c-solo' | 'together' | 'outage' | 'single-queue';

export interface FairnessRow {
  kind: RowKind;
  name: string;
  seconds: number;
  merchants: MerchantFigures[];
  /** A's Get orders at its platform (every worker together) in its busiest whole second, as a platform counts them. */
  aMaxPerSecond?: number;
  /** …and in the busiest sliding second (timers', the network's and this process's own jitter included). */
  aBusiestSecond?: number;
  /** A's jobs in the failed set at the end (failed for good). */
  aFailed?: number;
  /**
   * Cores used on average over the row: the worker processes, the bench's redis-server, the bench (its process, its
   * feeds, and its platform doubles' processes), and everything else on the machine (Postgres, and whatever else runs there).
   */
  cores: { workers: number; redis: number; bench: number; postgres: number; rest: number; machine: number };
}

export interface FairnessResult {
  options: Omit<FairnessOptions, 'redis'>;
  rows: FairnessRow[];
}

/** QUEUE_PREFIX of the bench's workers (startWorker's). */
const QUEUE_PREFIX = 'mcb';

export const MERCHANTS: Record<'a' | 'b' | 'c', BenchMerchant> = {
  a: { ref: 'a', merchantNo: 'M-BENCH-A', orderPrefix: 'FA-' },
  b: { ref: 'b', merchantNo: 'M-BENCH-B', orderPrefix: 'FB-' },
  c: { ref: 'c', merchantNo: 'M-BENCH-C', orderPrefix: 'FC-' },
};

/** What a row runs: who floods, who sends steadily, and the outage. */
interface Scenario {
  kind: RowKind;
  name: string;
  flood?: number;
  steady: ('b' | 'c')[];
  /** Steady senders stop after this long when nobody floods, in ms. */
  steadyMs?: number;
  outageMs?: number;
  /** One merchant (today's deployment): B's orders are A's merchant's. */
  single?: boolean;
}

export async function runFairness(o: FairnessOptions): Promise<FairnessResult> {
  const platforms = {
    a: await startPlatformProcess(MERCHANTS.a.merchantNo),
    b: await startPlatformProcess(MERCHANTS.b.merchantNo),
    c: await startPlatformProcess(MERCHANTS.c.merchantNo),
  };
  const pool = new pg.Pool({ connectionString: o.databaseUrl, max: 2 });
  const dir = mkdtempSync(join(tmpdir(), 'mcb-bench-fairness-'));
  const steadyCount = Math.ceil(o.rate * Math.max(o.soloSeconds, 600)) + 100;
  try {
    await setUpPlatforms(o, platforms, steadyCount);
    const rows: FairnessRow[] = [];
    const scenarios: Scenario[] = [
      { kind: 'a-solo', name: 'A solo', flood: o.flood, steady: [] },
      { kind: 'b-solo', name: 'B solo', steady: ['b'], steadyMs: o.soloSeconds * 1000 },
      { kind: 'c-solo', name: 'C solo', steady: ['c'], steadyMs: o.soloSeconds * 1000 },
      { kind: 'together', name: 'A + B + C', flood: o.flood, steady: ['b', 'c'] },
      {
        kind: 'outage',
        name: `A + B + C, A's platform 503 for ${o.outageSeconds} s`,
        flood: o.flood,
        steady: ['b', 'c'],
        outageMs: o.outageSeconds * 1000,
      },
      {
        kind: 'single-queue',
        name: `single queue (today): B as A's orders behind A's ${o.baseline}`,
        flood: o.baseline,
        steady: ['b'],
        single: true,
      },
    ];
    for (const s of scenarios.filter((x) => !o.rows || o.rows.includes(x.kind))) {
      const row = await runRow(o, s, { platforms, pool, dir, steadyCount });
      rows.push(row);
      for (const m of row.merchants)
        progress(
          `  ${m.ref}: ${m.credited}/${m.sent} credited, ${m.creditsPerSecond.toFixed(1)}/s, callback-to-credit p50 ${m.callbackToCreditMs.p50.toFixed(0)} ms, p99 ${m.callbackToCreditMs.p99.toFixed(0)} ms`,
        );
      const c = row.cores;
      progress(
        `  cores: workers ${c.workers.toFixed(2)}, redis ${c.redis.toFixed(2)}, bench ${c.bench.toFixed(2)}, Postgres ${c.postgres.toFixed(2)}, the rest of the machine ${c.rest.toFixed(2)}; machine ${c.machine.toFixed(2)} of 2`,
      );
      if (row.aMaxPerSecond !== undefined)
        progress(
          `  A's Get orders: at most ${row.aMaxPerSecond} in a second, ${row.aBusiestSecond} in the busiest sliding second (budget ${o.aRps})`,
        );
      if (row.aFailed !== undefined) progress(`  A's jobs failed for good: ${row.aFailed}`);
    }
    const { redis: _redis, ...options } = o;
    return { options, rows };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await pool.end();
    await Promise.all(Object.values(platforms).map((p) => p.close()));
  }
}

/** Every order of the bench, answered by its merchant's platform (the single-queue row's B orders by A's). */
async function setUpPlatforms(
  o: FairnessOptions,
  p: Record<'a' | 'b' | 'c', PlatformProcess>,
  steadyCount: number,
): Promise<void> {
  const set = (platform: PlatformProcess, m: BenchMerchant, count: number, merchantNo = m.merchantNo) =>
    platform.setOrders(m.orderPrefix, count, merchantNo, BENCH_AMOUNT);
  await set(p.a, MERCHANTS.a, Math.max(o.flood, o.baseline));
  await set(p.b, MERCHANTS.b, steadyCount);
  await set(p.c, MERCHANTS.c, steadyCount);
  // Today's deployment has one merchant: A's platform answers B's orders too, in B's 50 ms.
  await set(p.a, MERCHANTS.b, steadyCount, MERCHANTS.a.merchantNo);
  await p.a.setDelay(o.aDelayMs);
  await p.a.setDelay(o.bcDelayMs, MERCHANTS.b.orderPrefix);
  await p.b.setDelay(o.bcDelayMs);
  await p.c.setDelay(o.bcDelayMs);
}

interface RowDeps {
  platforms: Record<'a' | 'b' | 'c', PlatformProcess>;
  pool: pg.Pool;
  dir: string;
  steadyCount: number;
}

async function runRow(o: FairnessOptions, s: Scenario, d: RowDeps): Promise<FairnessRow> {
  progress(`${s.name}`);
  await o.redis.flush();
  await truncateAll(d.pool);
  await d.pool.query('truncate callback_arrivals');
  const a = MERCHANTS.a;
  await insertPendingPayins(d.pool, a.orderPrefix, Math.max(o.flood, o.baseline), BENCH_AMOUNT, 1, a.merchantNo);
  // Today's deployment (one merchant): B's and C's orders are A's merchant's, as their callbacks are.
  for (const m of [MERCHANTS.b, MERCHANTS.c])
    await insertPendingPayins(
      d.pool,
      m.orderPrefix,
      d.steadyCount,
      BENCH_AMOUNT,
      1,
      s.single ? a.merchantNo : m.merchantNo,
    );
  await d.pool.query('vacuum analyze orders');
  for (const p of Object.values(d.platforms)) await p.clearArrivals();

  const workers = await startWorkers(o, s, d);
  const connection = new Redis(o.redis.url, { maxRetriesPerRequest: null });
  // Today's deployment serves one merchant: B's callbacks carry A's number and share A's queue.
  const b = s.single ? { ...MERCHANTS.b, merchantNo: MERCHANTS.a.merchantNo } : MERCHANTS.b;
  const feeds = {
    a: merchantFeed(connection, MERCHANTS.a, QUEUE_PREFIX, s.single),
    b: merchantFeed(connection, b, QUEUE_PREFIX, s.single),
    c: merchantFeed(connection, MERCHANTS.c, QUEUE_PREFIX, s.single),
  };
  try {
    const t0 = Date.now();
    const cpu0 = cpuNow(
      workers.map((w) => w.pid),
      o.redis.child.pid,
      Object.values(d.platforms).map((p) => p.pid),
    );
    const pgCpu = trackPostgresCpu(
      (sql, params) => d.pool.query(sql, params),
      new URL(o.databaseUrl).pathname.slice(1),
    );
    if (s.outageMs) await d.platforms.a.setOutage(503);
    const outage = s.outageMs ? setTimeout(() => void d.platforms.a.setOutage(undefined), s.outageMs) : undefined;
    const steady = s.steady.map((ref) => feeds[ref].steady(o.rate));
    if (s.flood) {
      await feeds.a.flood(s.flood);
      await waitForCredits(d.pool, MERCHANTS.a, s.flood, (s.outageMs ?? 0) + Math.max(180_000, s.flood * 20));
    } else await sleep(s.steadyMs ?? 0);
    const sent = await Promise.all(steady.map((x) => x.stop()));
    clearTimeout(outage);
    await d.platforms.a.setOutage(undefined);
    // The last steady callbacks' credits.
    for (const [i, ref] of s.steady.entries()) await waitForCredits(d.pool, MERCHANTS[ref], sent[i]!, 30_000);
    const seconds = (Date.now() - t0) / 1000;
    const pgUsed = await pgCpu.stop();
    const cores = coresSince(
      cpu0,
      cpuNow(
        workers.map((w) => w.pid),
        o.redis.child.pid,
        Object.values(d.platforms).map((p) => p.pid),
      ),
      seconds,
      pgUsed.backendsSeconds + pgUsed.sharedSeconds,
    );
    const active = [...(s.flood ? (['a'] as const) : []), ...s.steady].map((ref) => feeds[ref]);
    const merchants = await figures(d.pool, active);
    const aFailed = s.flood ? await failedOf(connection, s.single) : undefined;
    // A's platform answers only A's orders, but for the single queue's B.
    const rate = s.flood && !s.single ? getOrderRate(await d.platforms.a.arrivals()) : undefined;
    return { kind: s.kind, name: s.name, seconds, cores, merchants, ...(s.flood ? { aFailed, ...rate } : {}) };
  } finally {
    await Promise.all(Object.values(feeds).map((f) => f.close()));
    connection.disconnect();
    await Promise.all(workers.map((w) => w.stop()));
  }
}

/** The worker processes of a row: a lane per merchant (MERCHANTS_FILE), or today's one merchant. */
async function startWorkers(o: FairnessOptions, s: Scenario, d: RowDeps) {
  const file = join(d.dir, 'merchants.json');
  const entry = (m: BenchMerchant, url: string, rps: number) => ({
    ref: m.ref,
    merchantNo: m.merchantNo,
    privateKeyFiles: [join(d.dir, `${m.ref}.pem`)],
    platformBaseUrl: url,
    getOrderRps: rps,
  });
  writeFileSync(
    file,
    JSON.stringify({
      merchants: [
        entry(MERCHANTS.a, d.platforms.a.url, o.aRps),
        entry(MERCHANTS.b, d.platforms.b.url, o.bcRps),
        entry(MERCHANTS.c, d.platforms.c.url, o.bcRps),
      ],
    }),
  );
  return Promise.all(
    Array.from({ length: o.workers }, () =>
      startWorker({
        redisUrl: o.redis.url,
        databaseUrl: o.databaseUrl,
        platformUrl: d.platforms.a.url,
        logLevel: o.logLevel,
        ...(s.single
          ? { merchantNo: MERCHANTS.a.merchantNo, env: { PLATFORM_MAX_RPS: String(o.aRps) } }
          : { merchantsFile: file }),
      }),
    ),
  );
}

/** Wait until `count` of `m`'s pay-ins have receipts, or `timeoutMs` passes (the figures then say how many). */
async function waitForCredits(pool: pg.Pool, m: BenchMerchant, count: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 0;
  let lastAt = Date.now();
  while (Date.now() < deadline) {
    const { rows } = await pool.query<{ n: number }>(
      'select count(*)::int as n from callback_receipts where order_no like $1',
      [`P${m.orderPrefix}%`],
    );
    const n = rows[0]!.n;
    if (n >= count) return;
    if (n !== last) [last, lastAt] = [n, Date.now()];
    if (Date.now() - lastAt > 10_000 && Date.now() - lastAt > timeoutMs / 4) break;
    await sleep(250);
  }
  progress(`  ${m.ref}: only ${last}/${count} credited in time`);
}

/** Each feed's merchant: sent, credited, credits/s and callback-to-credit (B's orders count as B's in every row). */
async function figures(pool: pg.Pool, feeds: MerchantFeed[]): Promise<MerchantFigures[]> {
  const { rows } = await pool.query<{ o: string; t: number }>(
    'select order_no as o, extract(epoch from applied_at) * 1000 as t from callback_receipts',
  );
  const appliedAt = new Map(rows.map((r) => [r.o, Number(r.t)]));
  return feeds.map((f) => {
    const toCredit: number[] = [];
    let first = Infinity;
    let last = 0;
    for (const [orderNo, sent] of f.sentAt) {
      first = Math.min(first, sent);
      const at = appliedAt.get(orderNo);
      if (at === undefined) continue;
      toCredit.push(at - sent);
      last = Math.max(last, at);
    }
    return {
      ref: f.merchant.ref,
      sent: f.sentAt.size,
      credited: toCredit.length,
      creditsPerSecond: toCredit.length / Math.max(0.001, (last - first) / 1000),
      callbackToCreditMs: summarize(toCredit),
    };
  });
}

/** A's jobs in its queue's failed set. */
async function failedOf(connection: Redis, single?: boolean): Promise<number> {
  const keys = merchantKeys(QUEUE_PREFIX, single ? undefined : MERCHANTS.a.ref);
  return connection.zcard(`${keys.prefix}:${keys.callbacksQueue}:failed`);
}

/** The most Get orders in a whole second from the first (as a platform counts them), and in any sliding second. */
function getOrderRate(arrivals: number[]): { aMaxPerSecond: number; aBusiestSecond: number } {
  const sorted = [...arrivals].sort((x, y) => x - y);
  const perSecond = new Map<number, number>();
  for (const t of sorted) {
    const second = Math.floor((t - sorted[0]!) / 1000);
    perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
  }
  let busiest = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= 1000) i++;
    busiest = Math.max(busiest, j - i + 1);
  }
  return { aMaxPerSecond: Math.max(0, ...perSecond.values()), aBusiestSecond: busiest };
}

/** Issue 50's targets, from the rows (reported, not asserted). */
export function fairnessTargets(
  r: FairnessResult,
): { name: string; target: string; value: string; met: boolean | null }[] {
  const of = (kind: RowKind, ref: string) => r.rows.find((x) => x.kind === kind)?.merchants.find((m) => m.ref === ref);
  const t: ReturnType<typeof fairnessTargets> = [];
  const soloA = of('a-solo', 'a');
  for (const [kind, label] of [
    ['together', 'while A floods'],
    ['outage', "while A floods and A's platform is down"],
  ] as const) {
    const row = r.rows.find((x) => x.kind === kind);
    if (!row) continue;
    for (const ref of ['b', 'c'] as const) {
      const m = of(kind, ref);
      const solo = of(ref === 'b' ? 'b-solo' : 'c-solo', ref);
      if (!m || !solo) continue;
      const [p99, soloP99] = [m.callbackToCreditMs.p99, solo.callbackToCreditMs.p99];
      t.push({
        name: `${ref.toUpperCase()}'s p99 ${label} (solo ${soloP99.toFixed(0)} ms)`,
        target: '<= solo + 300 ms, < 1 s',
        value: `${p99.toFixed(0)} ms (+${(p99 - soloP99).toFixed(0)})`,
        met: p99 <= soloP99 + 300 && p99 < 1000 && m.credited === m.sent,
      });
    }
    const a = of(kind, 'a');
    if (a && soloA) {
      const ratio = a.creditsPerSecond / soloA.creditsPerSecond;
      t.push({
        name: `A's credits/s ${label} ÷ A solo`,
        target: '>= 0.8',
        value: `${a.creditsPerSecond.toFixed(0)} / ${soloA.creditsPerSecond.toFixed(0)} = ${ratio.toFixed(2)}`,
        // With its platform down A cannot keep its pace; the target is that none of its jobs fails for good.
        met: kind === 'together' ? ratio >= 0.8 : null,
      });
    }
    if (row.aFailed !== undefined && a)
      t.push({
        name: `A ${label}: failed for good; credited`,
        target: `0; all ${a.sent}`,
        value: `${row.aFailed}; ${a.credited}`,
        met: row.aFailed === 0 && a.credited === a.sent,
      });
  }
  const most = Math.max(...r.rows.map((x) => x.aMaxPerSecond ?? 0));
  const busiest = Math.max(...r.rows.map((x) => x.aBusiestSecond ?? 0));
  t.push({
    name: "A's Get orders a second at its platform, all workers, every row",
    target: `<= ${Math.floor(r.options.aRps * 1.1)} (getOrderRps + 10 %)`,
    value: `${most} (busiest sliding second ${busiest})`,
    met: most <= r.options.aRps * 1.1,
  });
  const b = of('single-queue', 'b');
  const soloB = of('b-solo', 'b');
  if (b && soloB)
    t.push({
      name: `today's single queue: B's p99 behind A's ${r.options.baseline} (solo ${soloB.callbackToCreditMs.p99.toFixed(0)} ms)`,
      target: 'for comparison',
      value: `${b.callbackToCreditMs.p99.toFixed(0)} ms (${(b.callbackToCreditMs.p99 / soloB.callbackToCreditMs.p99).toFixed(0)}×)`,
      met: null,
    });
  return t;
}

/** CPU seconds so far: the workers', the bench redis-server's, this process's, and the whole machine's busy time. */
/** CPU seconds so far; the bench's own includes its platform processes'. */
function cpuNow(workerPids: number[], redisPid: number, platformPids: number[]) {
  const usage = process.cpuUsage();
  const [, ...jiffies] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).map(Number);
  const idle = (jiffies[3] ?? 0) + (jiffies[4] ?? 0);
  return {
    workers: workerPids.reduce((n, pid) => n + treeCpuSeconds(pid), 0),
    redis: cpuSecondsOf(redisPid),
    bench: (usage.user + usage.system) / 1e6 + platformPids.reduce((n, pid) => n + cpuSecondsOf(pid), 0),
    machine: (jiffies.slice(0, 8).reduce((n, j) => n + j, 0) - idle) / 100,
  };
}

function coresSince(a: ReturnType<typeof cpuNow>, b: ReturnType<typeof cpuNow>, seconds: number, pgSeconds: number) {
  const per = (k: keyof typeof a) => (b[k] - a[k]) / seconds;
  const [workers, redis, bench, machine] = [per('workers'), per('redis'), per('bench'), per('machine')];
  const postgres = pgSeconds / seconds;
  return { workers, redis, bench, postgres, rest: Math.max(0, machine - workers - redis - bench - postgres), machine };
}
