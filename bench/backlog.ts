/**
 * Backlog: N callback jobs queued directly with BullMQ (addBulk, the contract's job ids and options) on the
 * benchmark's own Redis: Redis memory per waiting job. Then a worker process drains it against a local platform
 * that answers Get order at once, with the worker's RSS sampled every second: is it flat while the backlog drains?
 */
import { PayinState } from '@mcb/core/spec';
import { createServer, type Server } from 'node:http';
import { Queue } from 'bullmq';
import { CALLBACKS_QUEUE, callbackJobId, callbackJobOptions, type CallbackJobInput } from '@mcb/core/queue';
import pg from 'pg';
import { BENCH_MERCHANT_NO } from './lib/callbacks.ts';
import { insertPendingPayins, truncateAll } from './lib/database.ts';
import { memoryOf } from './lib/proc.ts';
import { progress, sleep } from './lib/progress.ts';
import type { BenchRedis } from './lib/redis-server.ts';
import { slope } from './lib/stats.ts';
import { startWorker } from './lib/worker-process.ts';

export interface BacklogResult {
  jobs: number;
  enqueueSeconds: number;
  redisBytesBefore: number;
  redisBytesQueued: number;
  redisBytesPerJob: number;
  /** Redis memory per job after the drain phase (completed jobs are kept 3 days by the contract's options). */
  redisBytesPerJobAfterDrain: number;
  drained: number;
  drainSeconds: number;
  drainPerSecond: number;
  /** Whole backlog at that rate, seconds (measured when drained completely). */
  projectedFullDrainSeconds: number;
  complete: boolean;
  rss: {
    samples: { t: number; rss: number; drained: number }[];
    startBytes: number;
    middleBytes: number;
    endBytes: number;
    peakBytes: number;
    /** Least-squares growth of RSS per 1000 jobs drained, after the first 10 % of the run (warm-up). */
    slopeBytesPerKiloJob: number;
    /** That growth over the whole backlog, bytes. */
    projectedGrowthBytes: number;
    flat: boolean;
  };
}

const AMOUNT = '100.00';

/** A platform that answers Get order for `BL-<i>` at once: released (6), amount 100.00 INR. */
function startPlatform(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let merchantOrderNo = '';
      try {
        merchantOrderNo = String(
          (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { merchantOrderNo?: string }).merchantOrderNo ?? '',
        );
      } catch {
        // answered as unknown below
      }
      const known = merchantOrderNo.startsWith('BL-');
      const body = known
        ? {
            code: 0,
            message: 'ok',
            data: {
              orderNo: `PBL${merchantOrderNo.slice(3)}`,
              merchantNo: BENCH_MERCHANT_NO,
              merchantOrderNo,
              type: 'payin',
              state: PayinState.Released,
              amount: AMOUNT,
              currency: 'INR',
            },
          }
        : { code: 40404, message: 'order not found', data: null };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const addr = server.address();
      resolve({ server, url: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}` });
    }),
  );
}

function job(i: number, receivedAt: string): { name: 'payin'; data: CallbackJobInput; opts: object } {
  const orderNo = `PBL${i}`;
  return {
    name: 'payin',
    data: {
      kind: 'payin',
      orderNo,
      merchantNo: BENCH_MERCHANT_NO,
      merchantOrderNo: `BL-${i}`,
      state: PayinState.Released,
      payTime: receivedAt,
      quantity: '1.234567',
      fiatAmount: AMOUNT,
      receivedAt,
      source: 'callback',
    },
    opts: { ...callbackJobOptions, jobId: callbackJobId('payin', orderNo, PayinState.Released) },
  };
}

export async function runBacklog(o: {
  redis: BenchRedis;
  databaseUrl: string;
  jobs: number;
  drainSeconds: number;
  concurrency: number;
  logLevel: string;
}): Promise<BacklogResult> {
  await o.redis.flush();
  const pool = new pg.Pool({ connectionString: o.databaseUrl, max: 2 });
  const platform = await startPlatform();
  const queue = new Queue(CALLBACKS_QUEUE, { connection: { url: o.redis.url }, prefix: 'mcb' });
  try {
    await truncateAll(pool);
    await insertPendingPayins(pool, 'BL-', o.jobs, AMOUNT);
    await pool.query('vacuum analyze orders');
    progress(`  ${o.jobs} pending orders registered`);

    await queue.waitUntilReady();
    const redisBytesBefore = await o.redis.usedMemory();
    const t0 = performance.now();
    const receivedAt = new Date().toISOString();
    for (let from = 1; from <= o.jobs; from += 1000) {
      const batch = Array.from({ length: Math.min(1000, o.jobs - from + 1) }, (_, k) => job(from + k, receivedAt));
      await queue.addBulk(batch);
      if ((from - 1) % 50_000 === 0 && from > 1) progress(`  queued ${from - 1}`);
    }
    const enqueueSeconds = (performance.now() - t0) / 1000;
    const redisBytesQueued = await o.redis.usedMemory();
    const waiting = await queue.getWaitingCount();
    const perJob = (redisBytesQueued - redisBytesBefore) / o.jobs;
    progress(
      `  ${waiting} jobs waiting after ${enqueueSeconds.toFixed(1)} s; Redis used_memory +${((redisBytesQueued - redisBytesBefore) / 2 ** 20).toFixed(1)} MiB = ${perJob.toFixed(0)} B per job`,
    );

    const worker = await startWorker({
      redisUrl: o.redis.url,
      databaseUrl: o.databaseUrl,
      platformUrl: platform.url,
      concurrency: o.concurrency,
      logLevel: o.logLevel,
    });
    const samples: { t: number; rss: number; drained: number }[] = [];
    const d0 = performance.now();
    let drained = 0;
    let lastLog = 0;
    try {
      for (;;) {
        await sleep(1000);
        const t = (performance.now() - d0) / 1000;
        drained = Number(
          (await pool.query<{ n: string }>(`select count(*) as n from orders where status = 'credited'`)).rows[0]?.n ??
            0,
        );
        samples.push({ t, rss: memoryOf(worker.pid).rss, drained });
        if (t - lastLog >= 10) {
          lastLog = t;
          progress(
            `  drained ${drained}/${o.jobs} in ${t.toFixed(0)} s (${(drained / t).toFixed(0)}/s), worker RSS ${(samples.at(-1)!.rss / 2 ** 20).toFixed(0)} MiB`,
          );
        }
        if (drained >= o.jobs || t >= o.drainSeconds) break;
      }
    } finally {
      await worker.stop();
    }
    const drainSeconds = (performance.now() - d0) / 1000;
    const redisAfter = await o.redis.usedMemory();

    const warm = samples.filter((s) => s.t >= drainSeconds * 0.1);
    const fit = warm.length >= 2 ? warm : samples;
    const perJobSlope = slope(fit.map((s) => ({ x: s.drained, y: s.rss })));
    const rssAt = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * (samples.length - 1)))]?.rss ?? 0;
    const projectedGrowthBytes = perJobSlope * o.jobs;
    const drainPerSecond = drained / drainSeconds;
    return {
      jobs: o.jobs,
      enqueueSeconds,
      redisBytesBefore,
      redisBytesQueued,
      redisBytesPerJob: perJob,
      redisBytesPerJobAfterDrain: drained ? (redisAfter - redisBytesBefore) / o.jobs : Number.NaN,
      drained,
      drainSeconds,
      drainPerSecond,
      projectedFullDrainSeconds: o.jobs / drainPerSecond,
      complete: drained >= o.jobs,
      rss: {
        samples,
        startBytes: rssAt(0.1),
        middleBytes: rssAt(0.5),
        endBytes: rssAt(1),
        peakBytes: Math.max(...samples.map((s) => s.rss)),
        slopeBytesPerKiloJob: perJobSlope * 1000,
        projectedGrowthBytes,
        // Flat: the fitted growth over the whole backlog stays under 32 MiB (noise of GC and pools is larger than 0).
        flat: projectedGrowthBytes < 32 * 2 ** 20,
      },
    };
  } finally {
    await queue.close();
    await pool.end();
    await new Promise((r) => platform.server.close(r));
  }
}
