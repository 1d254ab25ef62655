/**
 * The comparison merchants need: the pipeline (ingest on all cores → Redis → one worker process, each at its
 * defaults) against an in-request receiver built from our own core (decrypt → Get order → one transaction inside
 * the handler, all cores; bench/lib/in-request-receiver.ts), side by side on this machine. Both face the same light
 * platform emulator in this process (Get order answered from memory after `delayMs`) and the same pre-encrypted
 * callbacks (N pay-ins + 10 % duplicates) fired by the same generator at `inFlight` requests at once, so the
 * sandbox's own CPU is in neither figure. CPU per credit counts every process of each system, Postgres and Redis.
 */
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { encryptRecord } from '@mcb/core/callback';
import { metricValue } from '@mcb/core/metrics';
import { PayinState } from '@mcb/core/spec';
import pg from 'pg';
import { Redis } from 'ioredis';
import { BENCH_MERCHANT_NO, payinRecordJson, type BenchKeys } from './lib/callbacks.ts';
import { insertPendingPayins, truncateAll } from './lib/database.ts';
import { REPO_ROOT, startIngest } from './lib/ingest-process.ts';
import { openConn, send } from './lib/load.ts';
import { cpuSecondsOf, freePort, launch, treeCpuSeconds, waitForHttp, type Child } from './lib/proc.ts';
import { monotonicUs, profileSession, type ProfileSummary } from './lib/profile-summary.ts';
import { progress, sleep } from './lib/progress.ts';
import type { BenchRedis } from './lib/redis-server.ts';
import { summarize, type LatencySummary } from './lib/stats.ts';
import { startWorker } from './lib/worker-process.ts';

export interface SystemRun {
  creditsPerSecond: number;
  replyMs: LatencySummary;
  callbackToCreditMs: LatencySummary;
  /** CPU ms per credit: the system's own processes, Postgres, Redis, and all of them. */
  cpuMsPerCredit: { own: number; postgres: number; redis: number; total: number; byProcess: Record<string, number> };
  /** Postgres transactions committed per credit (pg_stat_database). */
  postgresTransactionsPerCredit: number;
  non2xx: number;
  /** The worker's jobs in flight and its limit, sampled every 100 ms while the run lasted (pipeline only). */
  workerInFlight?: { peak: number; limitMin: number; limitMax: number };
  /** CPU profiles of the pipeline's processes (with --profile). */
  profiles?: Record<string, ProfileSummary | undefined>;
}

export interface CompareRow {
  getOrderDelayMs: number;
  inRequest: SystemRun;
  pipeline: SystemRun;
  /** pipeline credits/s ÷ in-request credits/s. */
  vsInRequest: number;
  /** pipeline CPU per credit ÷ in-request CPU per credit (all processes, Postgres and Redis included). */
  cpuRatio: number;
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

/** Sample the worker's in-flight gauges (its /metrics) every 100 ms until `stop()`. */
function sampleWorkerInFlight(metricsUrl: string): { stop: () => Promise<SystemRun['workerInFlight']> } {
  const seen = { peak: 0, limitMin: Infinity, limitMax: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const text = await fetch(metricsUrl).then((r) => (r.ok ? r.text() : ''), () => '');
      if (text.includes('mcb_worker_in_flight_limit')) {
        const limit = metricValue(text, 'mcb_worker_in_flight_limit');
        seen.peak = Math.max(seen.peak, metricValue(text, 'mcb_worker_in_flight'));
        seen.limitMin = Math.min(seen.limitMin, limit);
        seen.limitMax = Math.max(seen.limitMax, limit);
      }
      await sleep(100);
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

function postgresCpuSeconds(): number {
  try {
    const pids = execFileSync('pgrep', ['-u', 'postgres'], { encoding: 'utf8' }).trim().split(/\s+/).map(Number);
    return pids.reduce((s, p) => s + cpuSecondsOf(p), 0);
  } catch {
    return 0;
  }
}

/** Fire every request, `inFlight` at a time on keep-alive sockets; reply latency per request, send time per order. */
async function fire(port: number, requests: { orderNo: string; buf: Buffer }[], inFlight: number) {
  const conns = await Promise.all(Array.from({ length: inFlight }, () => openConn('127.0.0.1', port, () => {})));
  const replyMs: number[] = [];
  const firstSent = new Map<string, number>();
  let non2xx = 0;
  let next = 0;
  await Promise.all(
    conns.map(
      (c) =>
        new Promise<void>((resolve) => {
          const loop = () => {
            const r = requests[next++];
            if (!r) return resolve();
            const t = performance.now();
            if (!firstSent.has(r.orderNo)) firstSent.set(r.orderNo, Date.now());
            send(c, r.buf, (status) => {
              replyMs.push(performance.now() - t);
              if (status < 200 || status >= 300) non2xx++;
              loop();
            });
          };
          loop();
        }),
    ),
  );
  for (const c of conns) c.socket.destroy();
  return { replyMs, firstSent, non2xx };
}

async function runSystem(o: {
  which: 'inRequest' | 'pipeline';
  keys: BenchKeys;
  redis: BenchRedis;
  redisPid: number;
  databaseUrl: string;
  platformUrl: string;
  orders: number;
  inFlight: number;
  logLevel: string;
  profile?: boolean;
}): Promise<SystemRun> {
  const prof = o.profile && o.which === 'pipeline'
    ? { ingest: profileSession(`${REPO_ROOT}bench/results/profiles/ingest`), worker: profileSession(`${REPO_ROOT}bench/results/profiles/worker`) }
    : undefined;
  await o.redis.flush();
  const pool = new pg.Pool({ connectionString: o.databaseUrl, max: 2 });
  const children: Child[] = [];
  let workerMetricsUrl: string | undefined;
  try {
    await truncateAll(pool);
    const tag = `B${Date.now().toString(36).toUpperCase()}`;
    await insertPendingPayins(pool, `M${tag}-`, o.orders, '1000.10');
    await pool.query('vacuum analyze orders');
    // N distinct pay-ins, then 10 % of them again (the platform's retries), shuffled in.
    const distinct = Array.from({ length: o.orders }, (_, i) => `${tag}-${i + 1}`);
    const sequence = [...distinct, ...distinct.filter((_, i) => i % 10 === 0)];
    for (let i = sequence.length - 1; i > o.orders / 2; i--) {
      const j = Math.floor(o.orders / 2 + Math.random() * (i - o.orders / 2));
      [sequence[i], sequence[j]] = [sequence[j]!, sequence[i]!];
    }

    let port: number;
    let path: string;
    if (o.which === 'inRequest') {
      port = await freePort();
      path = '/callbacks/payin';
      const child = launch({
        name: 'in-request receiver',
        args: ['bench/lib/in-request-receiver.ts'],
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
      await waitForHttp(child, `http://127.0.0.1:${port}/readyz`, 60_000);
    } else {
      const ingest = await startIngest({ redisUrl: o.redis.url, privateKeyFile: o.keys.privateKeyFile, workers: 0, logLevel: o.logLevel, nodeArgs: prof?.ingest.nodeArgs });
      children.push(ingest.child);
      const worker = await startWorker({ redisUrl: o.redis.url, databaseUrl: o.databaseUrl, platformUrl: o.platformUrl, logLevel: o.logLevel, nodeArgs: prof?.worker.nodeArgs });
      children.push(worker);
      workerMetricsUrl = worker.metricsUrl;
      port = ingest.port;
      path = '/callbacks/payin';
    }
    const head = `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n`;
    const requests = sequence.map((id) => {
      const body = `{"encryptedData":"${encryptRecord(payinRecordJson(`P${id}`, `M${id}`, '1000.10'), o.keys.publicKeyPem)}"}`;
      return { orderNo: `P${id}`, buf: Buffer.from(`${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`) };
    });

    const stat = async () =>
      Number((await pool.query<{ n: string }>('select xact_commit as n from pg_stat_database where datname = current_database()')).rows[0]!.n);
    const own = () => children.reduce((s, c) => s + treeCpuSeconds(c.pid), 0);
    const byProcess0 = children.map((c) => treeCpuSeconds(c.pid));
    const cpu0 = { own: own(), pg: postgresCpuSeconds(), redis: cpuSecondsOf(o.redisPid), xact: await stat() };
    const t0 = performance.now();
    const fromUs = monotonicUs();
    const inFlightSampler = workerMetricsUrl ? sampleWorkerInFlight(workerMetricsUrl) : undefined;
    const fired = fire(port, requests, o.inFlight);
    let credited = 0;
    const deadline = t0 + Math.max(120_000, o.orders * 100);
    while (credited < o.orders) {
      await sleep(20);
      credited = Number((await pool.query<{ n: string }>('select count(*) as n from callback_receipts')).rows[0]!.n);
      if (performance.now() > deadline) throw new Error(`${o.which}: only ${credited}/${o.orders} credited in time`);
    }
    const seconds = (performance.now() - t0) / 1000;
    const measured = { fromUs, toUs: monotonicUs() };
    const workerInFlight = await inFlightSampler?.stop();
    const { replyMs, firstSent, non2xx } = await fired;
    const cpu = { own: own() - cpu0.own, pg: postgresCpuSeconds() - cpu0.pg, redis: cpuSecondsOf(o.redisPid) - cpu0.redis };
    const xacts = (await stat()) - cpu0.xact;
    const byProcess = Object.fromEntries(children.map((c, i) => [c.name, ((treeCpuSeconds(c.pid) - byProcess0[i]!) * 1000) / o.orders]));
    const rows = await pool.query<{ o: string; t: number }>('select order_no as o, extract(epoch from applied_at) * 1000 as t from callback_receipts');
    const toCredit = rows.rows.map((r) => Number(r.t) - (firstSent.get(r.o) ?? Number(r.t)));
    const per = (s: number) => (s * 1000) / o.orders;
    let profiles: SystemRun['profiles'];
    if (prof) {
      for (const c of [...children].reverse()) await c.stop();
      // The measured run only: start-up's module loading is not the per-credit work.
      profiles = { ingest: prof.ingest.collect(measured), worker: prof.worker.collect(measured) };
      for (const [name, p] of Object.entries(profiles)) {
        if (p) progress(`  profile ${name} (${p.processes} process${p.processes === 1 ? '' : 'es'}): ${p.byCategory.slice(0, 6).map((c) => `${c.category} ${(c.share * 100).toFixed(0)}%`).join(', ')}; ${p.topFunctions.slice(0, 10).map((f) => `${f.fn} ${(f.share * 100).toFixed(0)}%`).join(', ')}`);
      }
    }
    return {
      ...(profiles ? { profiles } : {}),
      ...(workerInFlight ? { workerInFlight } : {}),
      creditsPerSecond: o.orders / seconds,
      replyMs: summarize(replyMs),
      callbackToCreditMs: summarize(toCredit),
      cpuMsPerCredit: { own: per(cpu.own), postgres: per(cpu.pg), redis: per(cpu.redis), total: per(cpu.own + cpu.pg + cpu.redis), byProcess },
      postgresTransactionsPerCredit: xacts / o.orders,
      non2xx,
    };
  } finally {
    for (const c of children.reverse()) await c.stop();
    await pool.end();
  }
}

export async function runCompare(o: {
  keys: BenchKeys;
  redis: BenchRedis;
  databaseUrl: string;
  orders: number;
  inFlight: number;
  delaysMs: number[];
  logLevel: string;
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
      const inRequest = await runSystem({ ...base, which: 'inRequest' });
      const line = (name: string, r: SystemRun) =>
        progress(
          `  Get order ${delayMs} ms, ${name}: ${r.creditsPerSecond.toFixed(0)} credits/s; reply p50 ${r.replyMs.p50.toFixed(1)} p99 ${r.replyMs.p99.toFixed(1)} ms; ` +
            `callback→credit p50 ${r.callbackToCreditMs.p50.toFixed(0)} p99 ${r.callbackToCreditMs.p99.toFixed(0)} ms; CPU ${r.cpuMsPerCredit.total.toFixed(2)} ms/credit ` +
            `(${Object.entries(r.cpuMsPerCredit.byProcess).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}, Postgres ${r.cpuMsPerCredit.postgres.toFixed(2)}, Redis ${r.cpuMsPerCredit.redis.toFixed(2)}); ` +
            `${r.postgresTransactionsPerCredit.toFixed(2)} Postgres transactions/credit; non-2xx ${r.non2xx}` +
            (r.workerInFlight ? `; worker in flight peak ${r.workerInFlight.peak}, limit ${r.workerInFlight.limitMin}-${r.workerInFlight.limitMax}` : ''),
        );
      line('in-request', inRequest);
      const pipeline = await runSystem({ ...base, which: 'pipeline' });
      line('pipeline  ', pipeline);
      const row = {
        getOrderDelayMs: delayMs,
        inRequest,
        pipeline,
        vsInRequest: pipeline.creditsPerSecond / inRequest.creditsPerSecond,
        cpuRatio: pipeline.cpuMsPerCredit.total / inRequest.cpuMsPerCredit.total,
      };
      progress(`  e2e.vsInRequest @${delayMs} ms = ${row.vsInRequest.toFixed(2)}; CPU per credit pipeline ÷ in-request = ${row.cpuRatio.toFixed(2)}`);
      rows.push(row);
    } finally {
      await emulator.close();
    }
  }
  return rows;
}
