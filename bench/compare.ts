/**
 * The comparison merchants need: the pipeline (ingest → Redis → one worker process, each at its defaults: one
 * ingest process, INGEST_WORKERS=1) against the **lean in-request receiver** a merchant writes first (bench/lib/lean-receiver.ts: decrypt,
 * check the merchant, look up the pair and the order, Get order, one transaction, reply; pg and undici, none of our
 * packages), side by side on this machine. Optionally a third system, the **in-request receiver through our
 * settlement path** (bench/lib/in-request-receiver.ts: `applyEvent` inside the request), which prices our own money
 * path when it runs in the request; it is not the baseline.
 *
 * All face the same light platform emulator in this process (Get order answered from memory after `delayMs`) and
 * the same pre-encrypted callbacks (N pay-ins + 10 % duplicates) fired by the same generator at `inFlight` requests
 * at once, so the emulator's and generator's CPU (reported as "bench") is in no system's figure. A system's CPU is
 * that of its own processes, of the Postgres backends that served the bench's database, and (pipeline) of its
 * redis-server, from /proc, from the first request until the last reply (and, for the pipeline, an empty queue).
 * After each run the credits are checked in Postgres: every order credited once, one receipt per pair, one ledger
 * entry per order, the ledger's sum equal to the orders' sum.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { encryptRecord } from '@mcb/core/callback';
import { metricValue } from '@mcb/core/metrics';
import { PayinState } from '@mcb/core/spec';
import pg from 'pg';
import { Redis } from 'ioredis';
import { BENCH_MERCHANT_NO, payinRecordJson, type BenchKeys } from './lib/callbacks.ts';
import {
  BENCH_MONITOR_APP,
  postgresCounters,
  postgresCountersPerCredit,
  redisCounters,
  redisPerCredit,
  trackPostgresCpu,
  type Query,
  type RedisPerCredit,
} from './lib/cpu-breakdown.ts';
import { insertPendingPayins, truncateAll } from './lib/database.ts';
import { REPO_ROOT, startIngest } from './lib/ingest-process.ts';
import { openConn, send } from './lib/load.ts';
import { cpuSecondsOf, freePort, launch, treeCpuSeconds, waitForHttp, type Child } from './lib/proc.ts';
import { monotonicUs, profileSession, type ProfileSummary } from './lib/profile-summary.ts';
import { progress, sleep } from './lib/progress.ts';
import type { BenchRedis } from './lib/redis-server.ts';
import { summarize, type LatencySummary } from './lib/stats.ts';
import { startWorker } from './lib/worker-process.ts';

/** lean: the baseline; settlement: in-request through @mcb/settlement; pipeline: this project. */
export type SystemName = 'lean' | 'settlement' | 'pipeline';

export const SYSTEM_LABELS: Record<SystemName, string> = {
  lean: 'lean in-request receiver (the baseline: pg + undici, one transaction)',
  settlement: 'in-request receiver through @mcb/settlement (applyEvent in the request; not the baseline)',
  pipeline: 'pipeline (ingest → Redis → worker)',
};

export interface SystemRun {
  system: SystemName;
  creditsPerSecond: number;
  replyMs: LatencySummary;
  callbackToCreditMs: LatencySummary;
  /**
   * CPU ms per credit by process (the system's own processes, "Redis" for the pipeline's redis-server, "Postgres" for
   * the backends that served the bench's database) and their sum. Not in the total: Postgres's shared background
   * processes (WAL writer, checkpointer…: every database on the server uses them) and the bench's own process.
   */
  cpuMsPerCredit: { byProcess: Record<string, number>; total: number; postgresShared: number; bench: number };
  /** Each process's share of the total. */
  cpuShares: Record<string, number>;
  /** The total in RSA-2048 private decrypts of this run (CPU ms per credit ÷ CPU ms per decrypt). */
  rsaDecryptsPerCredit: number;
  postgres: {
    transactionsPerCredit: number;
    backends: number;
    rowsPerCredit: Record<string, { ins: number; upd: number; del: number }>;
  };
  /** Redis's work per credit (pipeline only). */
  redis?: RedisPerCredit;
  /** The credits as Postgres holds them after the run. */
  verified: CreditCheck;
  /**
   * Replies other than 2xx, by status ("closed": the connection closed before a reply; "unparsed": not a framed HTTP
   * reply); the platform would retry them.
   */
  non2xx: Record<string, number>;
  /** Requests sent again after a non-2xx reply (the platform's retries). */
  retries: number;
  /** The worker's jobs in flight and its limit, sampled every second while the run lasted (pipeline only). */
  workerInFlight?: { peak: number; limitMin: number; limitMax: number };
  /** CPU profiles of the pipeline's processes (with --profile). */
  profiles?: Record<string, ProfileSummary | undefined>;
}

export interface CreditCheck {
  orders: number;
  creditedOrders: number;
  receipts: number;
  ledgerEntries: number;
  /** Orders with more than one ledger entry, pairs with more than one receipt: both must be 0. */
  creditedTwice: number;
  pairsTwice: number;
  ledgerSumMatches: boolean;
  ok: boolean;
}

export interface CompareRow {
  getOrderDelayMs: number;
  lean: SystemRun;
  pipeline: SystemRun;
  settlement?: SystemRun;
  /** pipeline credits/s ÷ lean credits/s (with rounds: the median of the rounds' ratios). */
  vsLean: number;
  /** pipeline CPU per credit ÷ lean CPU per credit, all processes, Postgres and Redis included (with rounds: the median). */
  cpuRatio: number;
  /**
   * With `--compare-rounds N` > 1: every round, lean and pipeline run back to back, which goes first alternating. `lean`
   * and `pipeline` above are then the round whose CPU ratio is the median (lower median for an even N), shown in full.
   */
  rounds?: CompareRound[];
}

export interface CompareRound {
  lean: SystemRun;
  pipeline: SystemRun;
  vsLean: number;
  cpuRatio: number;
}

/** The median of a non-empty list (the mean of the middle two for an even length). */
export function median(values: number[]): number {
  const s = [...values].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** A row's rounds: its one pair when it ran a single round. */
export function roundsOf(row: CompareRow): CompareRound[] {
  return row.rounds ?? [{ lean: row.lean, pipeline: row.pipeline, vsLean: row.vsLean, cpuRatio: row.cpuRatio }];
}

/** Every system run a row holds (all rounds, and the settlement receiver's), for the credit check. */
export function runsOf(row: CompareRow): SystemRun[] {
  return [...roundsOf(row).flatMap((x) => [x.lean, x.pipeline]), ...(row.settlement ? [row.settlement] : [])];
}

/** The light platform: Get order from memory (every `MB…` order is a released pay-in `PB…`), after `delayMs`. */
async function startEmulator(delayMs: number): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const merchantOrderNo = String((JSON.parse(body) as { merchantOrderNo?: string }).merchantOrderNo ?? '');
      const reply =
        `{"code":0,"message":"success","data":{"orderNo":"P${merchantOrderNo.slice(1)}","merchantNo":"${BENCH_MERCHANT_NO}",` +
        `"merchantOrderNo":"${merchantOrderNo}","type":"payin","state":${PayinState.Released},"amount":1000.10,"currency":"INR"}}`;
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(reply);
      if (delayMs > 0) setTimeout(answer, delayMs);
      else answer();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

/**
 * Sample the worker's in-flight gauges (its /metrics) every second until `stop()`. Not faster: rendering /metrics
 * (prom-client, process CPU and memory, open files) every 100 ms took about 11 % of the worker's busy CPU at 0 ms
 * (its profile, 2026-11-26), work a production scrape every 15-30 s does not add.
 */
function sampleWorkerInFlight(metricsUrl: string): { stop: () => Promise<SystemRun['workerInFlight']> } {
  const seen = { peak: 0, limitMin: Infinity, limitMax: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const text = await fetch(metricsUrl).then(
        (r) => (r.ok ? r.text() : ''),
        () => '',
      );
      if (text.includes('mcb_worker_in_flight_limit')) {
        const limit = metricValue(text, 'mcb_worker_in_flight_limit');
        seen.peak = Math.max(seen.peak, metricValue(text, 'mcb_worker_in_flight'));
        seen.limitMin = Math.min(seen.limitMin, limit);
        seen.limitMax = Math.max(seen.limitMax, limit);
      }
      await sleep(1000);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return Number.isFinite(seen.limitMin) ? seen : undefined;
    },
  };
}

/**
 * Fire every request, `inFlight` at a time on keep-alive sockets; reply latency per request, send time per order.
 * A request answered other than 2xx is sent again at the end of the queue, up to 5 attempts in all, as the platform
 * retries a failed callback (sooner than its 3 minutes: the run would otherwise never see the credit).
 */
async function fire(port: number, requests: { orderNo: string; buf: Buffer }[], inFlight: number) {
  const conns = await Promise.all(Array.from({ length: inFlight }, () => openConn('127.0.0.1', port, () => {})));
  const replyMs: number[] = [];
  const firstSent = new Map<string, number>();
  const statuses: Record<string, number> = {};
  const queue = requests.map((r) => ({ ...r, attempt: 1 }));
  let retries = 0;
  let next = 0;
  let busy = 0;
  const idle: (() => void)[] = [];
  await Promise.all(
    conns.map(
      (c) =>
        new Promise<void>((resolve) => {
          const loop = () => {
            const r = queue[next++];
            if (!r) {
              next--;
              // Nothing left now, but a request in flight may still fail and come back: wait for it, or for the end.
              if (busy === 0) {
                resolve();
                for (const wake of idle.splice(0)) wake();
              } else idle.push(() => (queue[next] ? loop() : resolve()));
              return;
            }
            busy++;
            const t = performance.now();
            if (!firstSent.has(r.orderNo)) firstSent.set(r.orderNo, Date.now());
            send(c, r.buf, (status) => {
              busy--;
              replyMs.push(performance.now() - t);
              // A reply the generator could not frame (a chunked body) is counted, not taken for a 2xx.
              if (!(status >= 200 && status < 300)) {
                const k = Number.isNaN(status) ? 'unparsed' : status || 'closed';
                statuses[k] = (statuses[k] ?? 0) + 1;
                if (r.attempt < 5 && status) {
                  queue.push({ ...r, attempt: r.attempt + 1 });
                  retries++;
                  for (const wake of idle.splice(0)) wake();
                }
              }
              loop();
            });
          };
          loop();
        }),
    ),
  );
  for (const c of conns) c.socket.destroy();
  return { replyMs, firstSent, statuses, retries };
}

/** Every order credited once: one receipt per pair, one ledger entry per order, the ledger's sum = the orders'. */
async function checkCredits(client: pg.Client, orders: number): Promise<CreditCheck> {
  const r = (
    await client.query<{
      credited: string;
      receipts: string;
      ledger: string;
      twice: string;
      pairs: string;
      sums: boolean;
    }>(`
      select (select count(*) from orders where status = 'credited') as credited,
             (select count(*) from callback_receipts) as receipts,
             (select count(*) from ledger_entries) as ledger,
             (select count(*) from (select order_id from ledger_entries group by order_id having count(*) > 1) x) as twice,
             (select count(*) from (select 1 from callback_receipts group by order_no, state having count(*) > 1) x) as pairs,
             (select coalesce(sum(amount), 0) from ledger_entries) = (select coalesce(sum(amount), 0) from orders) as sums`)
  ).rows[0]!;
  const c = {
    orders,
    creditedOrders: Number(r.credited),
    receipts: Number(r.receipts),
    ledgerEntries: Number(r.ledger),
    creditedTwice: Number(r.twice),
    pairsTwice: Number(r.pairs),
    ledgerSumMatches: r.sums,
  };
  return {
    ...c,
    ok:
      c.creditedOrders === orders &&
      c.receipts === orders &&
      c.ledgerEntries === orders &&
      !c.creditedTwice &&
      !c.pairsTwice &&
      c.ledgerSumMatches,
  };
}

/** Wait until no backend other than `client`'s serves the database (they flush their statistics as they exit). */
async function waitForBackendsGone(client: pg.Client, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const n = await client.query<{ n: string }>(
      "select count(*) as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'",
    );
    if (Number(n.rows[0]!.n) === 0) return;
    await sleep(50);
  }
}

/** BullMQ's callbacks queue holds nothing waiting, active, delayed or prioritized. */
async function waitForQueueIdle(admin: Redis, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const q = 'mcb:callbacks';
  while (Date.now() < deadline) {
    const [wait, active, delayed, prioritized] = await Promise.all([
      admin.llen(`${q}:wait`),
      admin.llen(`${q}:active`),
      admin.zcard(`${q}:delayed`),
      admin.zcard(`${q}:prioritized`),
    ]);
    if (wait + active + delayed + prioritized === 0) return;
    await sleep(50);
  }
  throw new Error('pipeline: the callbacks queue did not empty within 60 s');
}

async function runSystem(o: {
  which: SystemName;
  keys: BenchKeys;
  redis: BenchRedis;
  redisPid: number;
  databaseUrl: string;
  platformUrl: string;
  orders: number;
  inFlight: number;
  logLevel: string;
  rsaCpuMsPerDecrypt: number;
  pipelineEnv?: Record<string, string>;
  profile?: boolean;
}): Promise<SystemRun> {
  const prof =
    o.profile && o.which === 'pipeline'
      ? {
          ingest: profileSession(`${REPO_ROOT}bench/results/profiles/ingest`),
          worker: profileSession(`${REPO_ROOT}bench/results/profiles/worker`),
        }
      : undefined;
  await o.redis.flush();
  const database = new URL(o.databaseUrl).pathname.slice(1);
  const tag = `B${Date.now().toString(36).toUpperCase()}`;
  {
    const setup = new pg.Pool({ connectionString: o.databaseUrl, max: 1, application_name: BENCH_MONITOR_APP });
    await truncateAll(setup);
    await insertPendingPayins(setup, `M${tag}-`, o.orders, '1000.10');
    await setup.query('vacuum analyze orders');
    await setup.end();
  }
  // N distinct pay-ins, then 10 % of them again (the platform's retries), shuffled into the second half.
  const distinct = Array.from({ length: o.orders }, (_, i) => `${tag}-${i + 1}`);
  const sequence = [...distinct, ...distinct.filter((_, i) => i % 10 === 0)];
  for (let i = sequence.length - 1; i > o.orders / 2; i--) {
    const j = Math.floor(o.orders / 2 + Math.random() * (i - o.orders / 2));
    [sequence[i], sequence[j]] = [sequence[j]!, sequence[i]!];
  }

  const children: Child[] = [];
  const monitor = new pg.Pool({ connectionString: o.databaseUrl, max: 2, application_name: BENCH_MONITOR_APP });
  let monitorQueries = 0;
  const monitorQuery: Query = (sql, params) => (monitorQueries++, monitor.query(sql, params));
  let workerMetricsUrl: string | undefined;
  try {
    let port: number;
    const receiver =
      o.which === 'lean'
        ? 'bench/lib/lean-receiver.ts'
        : o.which === 'settlement'
          ? 'bench/lib/in-request-receiver.ts'
          : undefined;
    if (receiver) {
      port = await freePort();
      const child = launch({
        name: o.which === 'lean' ? 'lean receiver' : 'settlement receiver',
        args: [receiver],
        cwd: REPO_ROOT,
        env: {
          PORT: String(port),
          DATABASE_URL: o.databaseUrl,
          PLATFORM_BASE_URL: o.platformUrl,
          PLATFORM_ALLOW_HTTP: 'true',
          MERCHANT_NO: BENCH_MERCHANT_NO,
          MERCHANT_PRIVATE_KEY_FILE: o.keys.privateKeyFile,
        },
      });
      children.push(child);
      // Ready once every cluster fork listens (else the first fork would get all 64 connections).
      await waitForHttp(child, `http://127.0.0.1:${port}/readyz`, 60_000);
    } else {
      const ingest = await startIngest({
        redisUrl: o.redis.url,
        privateKeyFile: o.keys.privateKeyFile,
        // Its default (INGEST_WORKERS=1): one process gathers bigger Redis batches; `--pipeline-env
        // INGEST_WORKERS=0` tries one per core.
        workers: 1,
        logLevel: o.logLevel,
        nodeArgs: prof?.ingest.nodeArgs,
        env: o.pipelineEnv,
      });
      children.push(Object.assign(ingest.child, { name: 'ingest' }));
      const worker = await startWorker({
        redisUrl: o.redis.url,
        databaseUrl: o.databaseUrl,
        platformUrl: o.platformUrl,
        logLevel: o.logLevel,
        nodeArgs: prof?.worker.nodeArgs,
        env: o.pipelineEnv,
      });
      children.push(worker);
      workerMetricsUrl = worker.metricsUrl;
      port = ingest.port;
    }
    const head = `POST /callbacks/payin HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n`;
    const requests = sequence.map((id) => {
      const body = `{"encryptedData":"${encryptRecord(payinRecordJson(`P${id}`, `M${id}`, '1000.10'), o.keys.publicKeyPem)}"}`;
      return {
        orderNo: `P${id}`,
        buf: Buffer.from(`${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`),
      };
    });

    // The window opens: every counter's start.
    const pgCounters0 = await postgresCounters(monitorQuery);
    monitorQueries = 0;
    const redis0 = await redisCounters(o.redis.admin, o.redisPid);
    const tree0 = children.map((c) => treeCpuSeconds(c.pid));
    const redisCpu0 = cpuSecondsOf(o.redisPid);
    const bench0 = process.cpuUsage();
    const pgCpu = trackPostgresCpu(monitorQuery, database);
    const t0 = performance.now();
    const fromUs = monotonicUs();
    const inFlightSampler = workerMetricsUrl ? sampleWorkerInFlight(workerMetricsUrl) : undefined;
    const fired = fire(port, requests, o.inFlight);
    let credited = 0;
    let settled = false;
    void fired.then(() => (settled = true));
    const deadline = t0 + Math.max(120_000, o.orders * 100);
    let progressAt = performance.now();
    while (credited < o.orders) {
      await sleep(20);
      const now = Number((await monitorQuery<{ n: string }>('select count(*) as n from callback_receipts')).rows[0]!.n);
      if (now > credited) progressAt = performance.now();
      credited = now;
      // Every callback answered (retries spent) and no credit for 10 s, or out of time: the check says FAILED. (The
      // pipeline answers long before it credits: only a stall counts, not the time since the last reply.)
      if (performance.now() > deadline || (settled && performance.now() - progressAt > 10_000)) {
        progress(`  ${o.which}: only ${credited}/${o.orders} credited; going on (the check will fail)`);
        break;
      }
    }
    const seconds = (performance.now() - t0) / 1000;
    const { replyMs, firstSent, statuses, retries } = await fired;
    if (o.which === 'pipeline') await waitForQueueIdle(o.redis.admin).catch((e: unknown) => progress(`  ${String(e)}`));
    // The window closes: all replies in, and the pipeline's queue empty (duplicates' jobs included).
    const measured = { fromUs, toUs: monotonicUs() };
    const treeCpu = children.map((c, i) => treeCpuSeconds(c.pid) - tree0[i]!);
    const redisCpu = cpuSecondsOf(o.redisPid) - redisCpu0;
    const benchCpu = process.cpuUsage(bench0);
    const redis1 = await redisCounters(o.redis.admin, o.redisPid);
    const pgUsed = await pgCpu.stop();
    const workerInFlight = await inFlightSampler?.stop();
    const rows = await monitorQuery<{ o: string; t: number }>(
      'select order_no as o, extract(epoch from applied_at) * 1000 as t from callback_receipts',
    );
    const toCredit = rows.rows.map((r) => Number(r.t) - (firstSent.get(r.o) ?? Number(r.t)));

    let profiles: SystemRun['profiles'];
    if (prof) {
      for (const c of [...children].reverse()) await c.stop();
      // The measured run only: start-up's module loading is not the per-credit work.
      profiles = { ingest: prof.ingest.collect(measured), worker: prof.worker.collect(measured) };
      for (const [name, p] of Object.entries(profiles)) {
        if (p)
          progress(
            `  profile ${name} (${p.processes} process${p.processes === 1 ? '' : 'es'}): ${p.byCategory
              .slice(0, 6)
              .map((c) => `${c.category} ${(c.share * 100).toFixed(0)}%`)
              .join(', ')}; ${p.topFunctions
              .slice(0, 10)
              .map((f) => `${f.fn} ${(f.share * 100).toFixed(0)}%`)
              .join(', ')}`,
          );
      }
    }
    // Counters and the check once every backend has gone (each flushes its statistics as it exits).
    for (const c of [...children].reverse()) await c.stop();
    const ownQueries = monitorQueries;
    await monitor.end();
    const checker = new pg.Client({ connectionString: o.databaseUrl, application_name: BENCH_MONITOR_APP });
    await checker.connect();
    let verified: CreditCheck;
    let pgPer: ReturnType<typeof postgresCountersPerCredit>;
    try {
      await waitForBackendsGone(checker);
      pgPer = postgresCountersPerCredit(
        pgCounters0,
        await postgresCounters((sql, params) => checker.query(sql, params)),
        o.orders,
        ownQueries,
      );
      verified = await checkCredits(checker, o.orders);
    } finally {
      await checker.end();
    }

    const per = (s: number) => (s * 1000) / o.orders;
    const byProcess: Record<string, number> = {};
    children.forEach((c, i) => (byProcess[c.name] = per(treeCpu[i]!)));
    if (o.which === 'pipeline') byProcess.Redis = per(redisCpu);
    byProcess.Postgres = per(pgUsed.backendsSeconds);
    const total = Object.values(byProcess).reduce((s, v) => s + v, 0);
    return {
      system: o.which,
      ...(profiles ? { profiles } : {}),
      ...(workerInFlight ? { workerInFlight } : {}),
      creditsPerSecond: credited / seconds,
      retries,
      replyMs: summarize(replyMs),
      callbackToCreditMs: summarize(toCredit),
      cpuMsPerCredit: {
        byProcess,
        total,
        postgresShared: per(pgUsed.sharedSeconds),
        bench: per((benchCpu.user + benchCpu.system) / 1e6),
      },
      cpuShares: Object.fromEntries(Object.entries(byProcess).map(([k, v]) => [k, total ? v / total : 0])),
      rsaDecryptsPerCredit: total / o.rsaCpuMsPerDecrypt,
      postgres: { transactionsPerCredit: pgPer.transactions, backends: pgUsed.backends, rowsPerCredit: pgPer.tables },
      ...(o.which === 'pipeline' ? { redis: redisPerCredit(redis0, redis1, o.orders) } : {}),
      verified,
      non2xx: statuses,
    };
  } finally {
    for (const c of children.reverse()) await c.stop();
    await monitor.end().catch(() => {});
  }
}

/** One line per system and delay on stderr: rate, latency, CPU by process, Postgres and Redis work, the check. */
export function describeRun(delayMs: number, r: SystemRun): string[] {
  const c = r.cpuMsPerCredit;
  const lines = [
    `  Get order ${delayMs} ms, ${SYSTEM_LABELS[r.system]}:`,
    `    ${r.creditsPerSecond.toFixed(0)} credits/s; reply p50 ${r.replyMs.p50.toFixed(1)} p99 ${r.replyMs.p99.toFixed(1)} ms; ` +
      `callback→credit p50 ${r.callbackToCreditMs.p50.toFixed(0)} p99 ${r.callbackToCreditMs.p99.toFixed(0)} ms; non-2xx ${
        Object.entries(r.non2xx)
          .map(([k, n]) => `${k}: ${n}`)
          .join(', ') || 'none'
      } (${r.retries} sent again)` +
      (r.workerInFlight
        ? `; worker in flight peak ${r.workerInFlight.peak}, limit ${r.workerInFlight.limitMin}-${r.workerInFlight.limitMax}`
        : ''),
    `    CPU ${c.total.toFixed(3)} ms/credit = ${r.rsaDecryptsPerCredit.toFixed(2)} RSA decrypts: ` +
      Object.entries(c.byProcess)
        .map(([k, v]) => `${k} ${v.toFixed(3)} (${((r.cpuShares[k] ?? 0) * 100).toFixed(0)} %)`)
        .join(', ') +
      `; not counted: Postgres shared background ${c.postgresShared.toFixed(3)}, bench load generator + emulator ${c.bench.toFixed(3)}`,
    `    Postgres: ${r.postgres.transactionsPerCredit.toFixed(2)} transactions/credit, ${r.postgres.backends} backends; rows/credit ` +
      Object.entries(r.postgres.rowsPerCredit)
        .map(
          ([t, x]) =>
            `${t} ${[x.ins && `+${x.ins.toFixed(2)}`, x.upd && `~${x.upd.toFixed(2)}`, x.del && `-${x.del.toFixed(2)}`].filter(Boolean).join(' ')}`,
        )
        .join(', '),
  ];
  if (r.redis) {
    const x = r.redis;
    lines.push(
      `    Redis: scripts ${x.scripts.calls.toFixed(2)} calls ${x.scripts.usec.toFixed(0)} µs/credit; stream entries (XADD) ${x.streamEntries.toFixed(2)}/credit; ` +
        `AOF ${x.aofBytes.toFixed(0)} B/credit, ${x.aofWrites === null ? '?' : x.aofWrites.toFixed(2)} AOF writes+fsyncs/credit; top commands ` +
        x.commands
          .slice(0, 8)
          .map((k) => `${k.name} ${k.calls.toFixed(2)}×/${k.usec.toFixed(0)} µs`)
          .join(', '),
    );
  }
  const v = r.verified;
  lines.push(
    `    check: ${v.creditedOrders}/${v.orders} orders credited, ${v.receipts} receipts, ${v.ledgerEntries} ledger entries, ` +
      `${v.creditedTwice} orders credited twice, ${v.pairsTwice} pairs twice, ledger sum ${v.ledgerSumMatches ? '=' : '≠'} orders' sum: ${v.ok ? 'ok' : 'FAILED'}`,
  );
  return lines;
}

export async function runCompare(o: {
  keys: BenchKeys;
  redis: BenchRedis;
  databaseUrl: string;
  orders: number;
  inFlight: number;
  delaysMs: number[];
  logLevel: string;
  /** CPU ms of one RSA private decrypt on this machine, this run. */
  rsaCpuMsPerDecrypt: number;
  /** Also run the in-request receiver through @mcb/settlement. */
  withSettlement?: boolean;
  /** Lean and pipeline run this many times at each latency, in alternating order; the ratios are the medians. */
  rounds?: number;
  /** Settings given to ingest and the worker (to try one by configuration). */
  pipelineEnv?: Record<string, string>;
  profile?: boolean;
}): Promise<CompareRow[]> {
  const probe = new Redis(o.redis.url);
  const redisPid = Number(/process_id:(\d+)/.exec(await probe.info('server'))?.[1] ?? 0);
  probe.disconnect();
  const rows: CompareRow[] = [];
  for (const delayMs of o.delaysMs) {
    const emulator = await startEmulator(delayMs);
    try {
      const base = { ...o, redisPid, platformUrl: emulator.url };
      const run = async (which: SystemName) => {
        const r = await runSystem({ ...base, which });
        for (const l of describeRun(delayMs, r)) progress(l);
        return r;
      };
      const rounds: CompareRound[] = [];
      const count = Math.max(1, o.rounds ?? 1);
      for (let i = 0; i < count; i++) {
        // Alternated, so that a drift of the machine (a neighbour, a warming cache) does not favour one system.
        const ran: Partial<Record<SystemName, SystemRun>> = {};
        for (const s of i % 2 === 0 ? (['lean', 'pipeline'] as const) : (['pipeline', 'lean'] as const))
          ran[s] = await run(s);
        const [lean, pipeline] = [ran.lean!, ran.pipeline!];
        const round = {
          lean,
          pipeline,
          vsLean: pipeline.creditsPerSecond / lean.creditsPerSecond,
          cpuRatio: pipeline.cpuMsPerCredit.total / lean.cpuMsPerCredit.total,
        };
        if (count > 1)
          progress(
            `  @${delayMs} ms round ${i + 1}/${count}: pipeline ÷ lean: credits/s ${round.vsLean.toFixed(2)}, CPU per credit ${round.cpuRatio.toFixed(2)}`,
          );
        rounds.push(round);
      }
      const settlement = o.withSettlement ? await run('settlement') : undefined;
      const middle = [...rounds].sort((x, y) => x.cpuRatio - y.cpuRatio)[(rounds.length - 1) >> 1]!;
      const row: CompareRow = {
        getOrderDelayMs: delayMs,
        lean: middle.lean,
        pipeline: middle.pipeline,
        ...(settlement ? { settlement } : {}),
        vsLean: median(rounds.map((x) => x.vsLean)),
        cpuRatio: median(rounds.map((x) => x.cpuRatio)),
        ...(count > 1 ? { rounds } : {}),
      };
      progress(
        `  @${delayMs} ms: pipeline ÷ lean: credits/s ${row.vsLean.toFixed(2)}, CPU per credit ${row.cpuRatio.toFixed(2)}` +
          (count > 1 ? ` (medians of ${count} rounds)` : ''),
      );
      rows.push(row);
    } finally {
      await emulator.close();
    }
  }
  return rows;
}
