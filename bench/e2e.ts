/**
 * End to end: the sandbox (in this process, time scale 600) delivers pay-in callbacks for N registered orders to an
 * ingest process; a worker process confirms each with the sandbox's Get order and credits it in Postgres. The
 * sandbox keeps `inFlight` orders between "finalised" and "credited" (a closed loop over the whole pipeline), so the
 * rate is what the pipeline sustains and the latency is that of a busy pipeline, not of an ever-growing queue.
 * Latency: the sandbox's first attempt (send time) to the receipt's applied_at.
 */
import { PayinState } from '@mcb/core/spec';
import pg from 'pg';
import { buildApp, type Attempt, type Delivery } from '@mcb/sandbox';
import { createLogger } from '@mcb/core/logger';
import { BENCH_MERCHANT_NO, type BenchKeys } from './lib/callbacks.ts';
import { insertPendingPayins, truncateAll } from './lib/database.ts';
import { startIngest } from './lib/ingest-process.ts';
import { sampleMemory, treeCpuSeconds } from './lib/proc.ts';
import { profileSession, type ProfileSummary } from './lib/profile-summary.ts';
import { join } from 'node:path';
import { REPO_ROOT } from './lib/ingest-process.ts';
import { progress, sleep } from './lib/progress.ts';
import type { BenchRedis } from './lib/redis-server.ts';
import { summarize, type LatencySummary } from './lib/stats.ts';
import { startWorker } from './lib/worker-process.ts';

export interface E2eResult {
  orders: number;
  credited: number;
  inFlight: number;
  seconds: number;
  creditsPerSecond: number;
  latencyMs: LatencySummary;
  /** Callback attempts that did not get `success` (retried by the sandbox on its schedule). */
  failedAttempts: number;
  /** CPU seconds per wall second: ingest, worker, this process (sandbox + driver). */
  cpu: { ingest: number; worker: number; sandboxAndDriver: number };
  peakRssBytes: { ingest: number; worker: number };
  /** Credits per second ÷ the Postgres credit-transaction limit. */
  ratio: number;
  /** CPU profile of the worker (with --profile). */
  workerProfile?: ProfileSummary;
}

export async function runE2e(o: {
  keys: BenchKeys;
  redis: BenchRedis;
  databaseUrl: string;
  orders: number;
  concurrency: number;
  logLevel: string;
  postgresTps: number;
  inFlight?: number;
  ingestWorkers?: number;
  profile?: boolean;
}): Promise<E2eResult> {
  const prof = o.profile ? profileSession(join(REPO_ROOT, 'bench/results/profiles')) : undefined;
  const inFlight = o.inFlight ?? 64;
  await o.redis.flush();
  const pool = new pg.Pool({ connectionString: o.databaseUrl, max: 2 });
  await truncateAll(pool);
  await insertPendingPayins(pool, 'E2E-', o.orders, '1000.10');
  await pool.query('vacuum analyze orders');

  const ingest = await startIngest({
    redisUrl: o.redis.url,
    privateKeyFile: o.keys.privateKeyFile,
    workers: o.ingestWorkers ?? 1,
    logLevel: o.logLevel,
  });
  const sandbox = await buildApp({
    merchantNo: BENCH_MERCHANT_NO,
    merchantPublicKeyPem: o.keys.publicKeyPem,
    timeScale: 600,
    firstAttemptDelayMs: 0,
    payinCallbackUrl: `http://${ingest.host}:${ingest.port}/callbacks/payin`,
    logger: createLogger({ name: 'sandbox', level: 'warn' }),
  });
  await sandbox.listen({ host: '127.0.0.1', port: 0 });
  const address = sandbox.server.address();
  const platformUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const worker = await startWorker({
    redisUrl: o.redis.url,
    databaseUrl: o.databaseUrl,
    platformUrl,
    concurrency: o.concurrency,
    logLevel: o.logLevel,
    nodeArgs: prof?.nodeArgs,
  });
  const memIngest = sampleMemory(ingest.child.pid, 500);
  const memWorker = sampleMemory(worker.pid, 500);

  try {
    const sim = sandbox.sandbox;
    for (let i = 1; i <= o.orders; i++)
      sim.createPayin({ merchantOrderNo: `E2E-${i}`, currency: 'INR', amount: '1000.10' });
    const sentAt = new Map<string, number>();
    let failedAttempts = 0;
    sim.events.on('attempt', (d: Delivery, a: Attempt) => {
      if (a.outcome !== 'success') failedAttempts++;
      if (a.number === 1 && a.copy === 1) sentAt.set(d.merchantOrderNo, Date.parse(a.at));
    });

    const cpu0 = {
      ingest: treeCpuSeconds(ingest.child.pid),
      worker: treeCpuSeconds(worker.pid),
      self: process.cpuUsage(),
    };
    const t0 = performance.now();
    let finalized = 0;
    let credited = 0;
    let lastLog = t0;
    const deadline = t0 + Math.max(120_000, o.orders * 50);
    while (credited < o.orders) {
      while (finalized < o.orders && finalized - credited < inFlight)
        sim.finalize(`E2E-${++finalized}`, PayinState.Released);
      await sleep(10);
      const r = await pool.query<{ n: string }>('select count(*) as n from callback_receipts');
      credited = Number(r.rows[0]?.n ?? 0);
      const now = performance.now();
      if (now - lastLog > 5000) {
        lastLog = now;
        progress(`  credited ${credited}/${o.orders} (${(credited / ((now - t0) / 1000)).toFixed(0)}/s)`);
      }
      if (now > deadline)
        throw new Error(`end to end: only ${credited}/${o.orders} credited in ${((now - t0) / 1000).toFixed(0)} s`);
    }
    const seconds = (performance.now() - t0) / 1000;
    const self = process.cpuUsage(cpu0.self);
    const cpu = {
      ingest: (treeCpuSeconds(ingest.child.pid) - cpu0.ingest) / seconds,
      worker: (treeCpuSeconds(worker.pid) - cpu0.worker) / seconds,
      sandboxAndDriver: (self.user + self.system) / 1e6 / seconds,
    };
    const rows = await pool.query<{ m: string; t: number; n: string }>(
      `select r.merchant_order_no as m, extract(epoch from r.applied_at) * 1000 as t,
              (select count(*) from orders where status = 'credited') as n
         from callback_receipts r`,
    );
    const lat: number[] = [];
    for (const row of rows.rows) {
      const s = sentAt.get(row.m);
      if (s !== undefined) lat.push(Number(row.t) - s);
    }
    const creditedOrders = Number(rows.rows[0]?.n ?? 0);
    const creditsPerSecond = creditedOrders / seconds;
    const latencyMs = summarize(lat);
    progress(
      `  ${creditedOrders} credited in ${seconds.toFixed(1)} s: ${creditsPerSecond.toFixed(0)}/s; callback→credit p50 ${latencyMs.p50.toFixed(0)} ms, ` +
        `p99 ${latencyMs.p99.toFixed(0)} ms; CPU ingest ${cpu.ingest.toFixed(2)}, worker ${cpu.worker.toFixed(2)}, sandbox+driver ${cpu.sandboxAndDriver.toFixed(2)}`,
    );
    await worker.stop();
    const workerProfile = prof?.collect();
    return {
      ...(workerProfile ? { workerProfile } : {}),
      orders: o.orders,
      credited: creditedOrders,
      inFlight,
      seconds,
      creditsPerSecond,
      latencyMs,
      failedAttempts,
      cpu,
      peakRssBytes: { ingest: memIngest.stop().peak, worker: memWorker.stop().peak },
      ratio: creditsPerSecond / o.postgresTps,
    };
  } finally {
    memIngest.stop();
    memWorker.stop();
    await worker.stop();
    await ingest.child.stop();
    await sandbox.close();
    await pool.end();
  }
}
