import { orders } from '@mcb/core/db';
import { metricValue } from '@mcb/core/metrics';
import { callbackJobId, callbackJobOptions, merchantKeys, type CallbackJobInput } from '@mcb/core/queue';
import {
  payinEvent,
  platformOrder,
  startFakePlatform,
  uid,
  waitFor,
  writeMerchantsFile,
  type FakePlatform,
  type TestEnv,
} from '@mcb/testkit';
import { startWorkerMainProcess, workerTest, type WorkerMainProcess } from '@mcb/testkit/worker';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect } from 'vitest';

// Issue 50, with real worker processes (main.ts, two of them, MERCHANTS_FILE): merchant A floods a backlog on a slow
// platform with a small Get order budget; merchant B's callbacks are credited while A's backlog is still large, while
// A's platform answers 503, and through a worker's SIGKILL; nothing of either is lost, failed or credited twice.
// The three steps share one stack and follow each other: A's backlog drains under all of them.

const A = { ref: 'a', merchantNo: 'M-PROC-A', getOrderRps: 100 };
const B = { ref: 'b', merchantNo: 'M-PROC-B' };
const A_FLOOD = 2000;

interface Stack {
  env: TestEnv;
  platforms: { a: FakePlatform; b: FakePlatform };
  workers: WorkerMainProcess[];
  /** Start one more worker process (as the others). */
  startWorker(): Promise<WorkerMainProcess>;
  queues: { a: Queue<CallbackJobInput>; b: Queue<CallbackJobInput> };
  run: string;
}

const it = workerTest.extend('stack', { scope: 'file' }, async ({ env }, { onCleanup }): Promise<Stack> => {
  const closers: (() => Promise<unknown>)[] = [];
  onCleanup(async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  });
  const a = await startFakePlatform({ merchantNo: A.merchantNo });
  closers.push(() => a.close());
  const b = await startFakePlatform({ merchantNo: B.merchantNo });
  closers.push(() => b.close());
  a.setDelay(300);
  b.setDelay(20);
  const file = writeMerchantsFile([
    { ...A, platformBaseUrl: a.url },
    { ...B, platformBaseUrl: b.url },
  ]);
  closers.push(async () => file.remove());
  const workers: WorkerMainProcess[] = [];
  const startWorker = async () => {
    const w = await startWorkerMainProcess({
      MERCHANTS_FILE: file.path,
      PLATFORM_BASE_URL: a.url,
      PLATFORM_ALLOW_HTTP: 'true',
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      QUEUE_PREFIX: env.prefix,
      // A dead worker's jobs run again within seconds, as the chaos suite sets it.
      WORKER_LOCK_DURATION: '3s',
      WORKER_STALLED_INTERVAL: '1s',
      WORKER_SHUTDOWN_TIMEOUT: '5s',
    });
    workers.push(w);
    closers.push(() => w.stop());
    return w;
  };
  await Promise.all([startWorker(), startWorker()]);
  const connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
  closers.push(async () => connection.disconnect());
  const queueOf = (ref: string) => {
    const keys = merchantKeys(env.prefix, ref);
    const q = new Queue<CallbackJobInput>(keys.callbacksQueue, { connection, prefix: keys.prefix });
    closers.push(() => q.close());
    return q;
  };
  return { env, platforms: { a, b }, workers, startWorker, queues: { a: queueOf('a'), b: queueOf('b') }, run: uid() };
});

/** `n` pay-ins of `m`, registered with us and released at its platform; their jobs as ingest makes them. */
async function payins(stack: Stack, m: { ref: string; merchantNo: string }, from: number, n: number) {
  const nos = Array.from({ length: n }, (_, i) => `${m.ref.toUpperCase()}-${stack.run}-${from + i}`);
  const rows = nos.map((no) => ({
    merchantNo: m.merchantNo,
    merchantOrderNo: no,
    kind: 'payin' as const,
    amount: '10',
    currency: 'PHP',
    requestHash: `t-${no}`,
  }));
  for (let i = 0; i < rows.length; i += 1000) await stack.env.db.db.insert(orders).values(rows.slice(i, i + 1000));
  const platform = stack.platforms[m.ref as 'a' | 'b'];
  for (const no of nos)
    platform.setOrder(
      platformOrder({
        orderNo: `P${no}`,
        merchantNo: m.merchantNo,
        merchantOrderNo: no,
        type: 'payin',
        state: 6,
        amountJson: '10',
      }),
    );
  return nos.map((no) => {
    const data: CallbackJobInput = {
      ...payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10' }),
      merchantNo: m.merchantNo,
    };
    return { name: 'payin', data, opts: { ...callbackJobOptions, jobId: callbackJobId('payin', data.orderNo, 6) } };
  });
}

/** Orders of merchant `ref` credited so far. */
async function credited(stack: Stack, ref: string): Promise<number> {
  const { rows } = await stack.env.db.pool.query<{ n: number }>(
    `select count(*)::int as n from orders where status = 'credited' and merchant_order_no like $1`,
    [`${ref.toUpperCase()}-${stack.run}-%`],
  );
  return rows[0]!.n;
}

/** A's jobs still waiting (its backlog). */
const backlogOfA = (stack: Stack) => stack.queues.a.getJobCountByTypes('waiting', 'delayed', 'prioritized');

/** Send B's `n` callbacks, a few at a time, and wait until B has `total` credited. */
async function sendB(stack: Stack, from: number, n: number, total: number) {
  const jobs = await payins(stack, B, from, n);
  for (let i = 0; i < jobs.length; i += 5) await stack.queues.b.addBulk(jobs.slice(i, i + 5));
  await waitFor(async () => (await credited(stack, 'b')) === total, {
    timeoutMs: 30_000,
    intervalMs: 100,
    message: `B's callbacks not credited (${total} expected)`,
  });
}

describe('worker processes with a lane per merchant', () => {
  it("credit B while A's backlog is still large", async ({ stack }) => {
    // 1. A's flood: its budget (100 Get orders a second in all) makes it a backlog of about 20 s.
    const flood = await payins(stack, A, 0, A_FLOOD);
    for (let i = 0; i < flood.length; i += 500) await stack.queues.a.addBulk(flood.slice(i, i + 500));
    await waitFor(async () => (await credited(stack, 'a')) > 0, { timeoutMs: 30_000, message: 'A never started' });
    // 2. B's callbacks are credited while most of A's wait (a single queue would hold them behind all of A's).
    await sendB(stack, 0, 20, 20);
    expect(await backlogOfA(stack)).toBeGreaterThan(A_FLOOD / 2);
  }, 90_000);

  it("credit B while A's platform answers 503, and fail none of A's jobs for good", async ({ stack }) => {
    stack.platforms.a.setOutage(503);
    try {
      // A's Get orders fail and its breaker opens (fleet-wide); B's lane has its own and goes on.
      await sendB(stack, 20, 20, 40);
      expect(await backlogOfA(stack)).toBeGreaterThan(0);
    } finally {
      stack.platforms.a.setOutage(undefined);
    }
    expect(await stack.queues.a.getFailedCount()).toBe(0);
  }, 90_000);

  it('lose nothing of either merchant when a worker is SIGKILLed mid-flood, and credit each order once', async ({
    stack,
  }) => {
    await waitFor(async () => (await credited(stack, 'a')) > 0, { timeoutMs: 30_000, message: 'A never resumed' });
    expect(await credited(stack, 'a')).toBeLessThan(A_FLOOD);
    // 1. One worker dies holding jobs of A (and perhaps of B); another takes its place.
    const victim = stack.workers[0]!;
    await waitFor(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${victim.metricsPort}/metrics`)).text();
        return metricValue(text, 'mcb_worker_in_flight', { merchant: 'a' }) > 0;
      },
      { timeoutMs: 10_000, intervalMs: 50, message: 'the worker held none of A' },
    );
    await victim.kill();
    await stack.startWorker();
    await sendB(stack, 40, 20, 60);
    // 2. Its jobs run again once their locks lapse: every order of both is credited, once.
    await waitFor(async () => (await credited(stack, 'a')) === A_FLOOD, {
      timeoutMs: 90_000,
      intervalMs: 500,
      message: "A's backlog was not credited in full",
    });
    const { rows } = await stack.env.db.pool.query<{ entries: number; orders: number; receipts: number }>(
      `select (select count(*)::int from ledger_entries) as entries,
              (select count(distinct order_id)::int from ledger_entries) as orders,
              (select count(*)::int from callback_receipts) as receipts`,
    );
    expect(rows[0]).toEqual({ entries: A_FLOOD + 60, orders: A_FLOOD + 60, receipts: A_FLOOD + 60 });
    expect(await stack.queues.a.getFailedCount()).toBe(0);
    expect(await stack.queues.b.getFailedCount()).toBe(0);
  }, 150_000);
});
