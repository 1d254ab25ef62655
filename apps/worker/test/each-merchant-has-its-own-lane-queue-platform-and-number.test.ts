import { loadConfig } from '@mcb/core/config';
import { createLogger } from '@mcb/core/logger';
import { metricValue } from '@mcb/core/metrics';
import { callbackJobId, callbackJobOptions, merchantKeys, type CallbackJobInput } from '@mcb/core/queue';
import {
  createOrder,
  payinEvent,
  platformOrder,
  startFakePlatform,
  uid,
  waitFor,
  writeMerchantsFile,
  type FakePlatform,
  type MerchantEntry,
  type TestEnv,
} from '@mcb/testkit';
import { orderState, reviewsFor, workerTest } from '@mcb/testkit/worker';
import { Queue } from 'bullmq';
import { describe, expect } from 'vitest';
import { runWorker, type WorkerRunner } from '../src/index.ts';

// Issue 50: a worker process runs a lane per merchant of MERCHANTS_FILE: its own queue, its own Get order (base
// URL, merchant number, connection pool), and it settles only its own merchant's jobs.

const A = { ref: 'a', merchantNo: 'M-LANE-A' };
const B = { ref: 'b', merchantNo: 'M-LANE-B' };
const C = { ref: 'c', merchantNo: 'M-LANE-C' };
const D = { ref: 'd', merchantNo: 'M-LANE-D' };
const silent = createLogger({ name: 'lanes-test', level: 'silent' });

/** A runner serving `merchants` (a MERCHANTS_FILE), on the file's database and prefix. */
async function startRunner(env: TestEnv, merchants: MerchantEntry[], onCleanup: (fn: () => Promise<void>) => void) {
  const file = writeMerchantsFile(merchants);
  const config = loadConfig(
    {
      MERCHANTS_FILE: file.path,
      PLATFORM_BASE_URL: merchants[0]!.platformBaseUrl!,
      PLATFORM_ALLOW_HTTP: 'true',
      PLATFORM_TIMEOUT: '5s',
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      QUEUE_PREFIX: env.prefix,
      // Two jobs in flight a lane: two keep-alive connections in each lane's pool.
      WORKER_CONCURRENCY: '2',
      WORKER_DB_POOL: '4',
      WORKER_METRICS_PORT: '0',
      LOG_LEVEL: 'silent',
    },
    'worker',
  );
  const runner = await runWorker({
    config,
    logger: silent,
    tuning: { callbacks: { backoff: { baseMs: 20, capMs: 200 }, releaseReviewedJobIds: false } },
  });
  const queues = new Map(
    merchants.map((m) => {
      const keys = merchantKeys(env.prefix, m.ref);
      return [
        m.ref,
        new Queue<CallbackJobInput>(keys.callbacksQueue, { connection: runner.redis, prefix: keys.prefix }),
      ];
    }),
  );
  onCleanup(async () => {
    await Promise.all([...queues.values()].map((q) => q.close()));
    await runner.stop();
    file.remove();
  });
  return { runner, queue: (ref: string) => queues.get(ref)! };
}

const it = workerTest
  // Merchants a and b, each on a platform of its own that knows only its number.
  .extend('platforms', { scope: 'file' }, async ({ services: _services }, { onCleanup }) => {
    const a = await startFakePlatform({ merchantNo: A.merchantNo });
    const b = await startFakePlatform({ merchantNo: B.merchantNo });
    onCleanup(async () => void (await Promise.all([a.close(), b.close()])));
    return { a, b };
  })
  .extend('lanes', { scope: 'file' }, ({ env, platforms }, { onCleanup }) =>
    startRunner(
      env,
      [
        { ...A, platformBaseUrl: platforms.a.url },
        { ...B, platformBaseUrl: platforms.b.url },
      ],
      onCleanup,
    ),
  )
  // Merchants c and d on one platform host (the same base URL).
  .extend('shared', { scope: 'file' }, async ({ env }, { onCleanup }) => {
    const platform = await startFakePlatform();
    const started = await startRunner(
      env,
      [
        { ...C, platformBaseUrl: platform.url },
        { ...D, platformBaseUrl: platform.url },
      ],
      async () => undefined,
    ).catch(async (e: unknown) => {
      await platform.close();
      throw e;
    });
    onCleanup(async () => {
      await started.runner.stop();
      await platform.close();
    });
    return { ...started, platform };
  });

/** A pay-in of `merchant` registered with us and released at `platform`; its callback's job as ingest makes it. */
async function releasedPayin(env: TestEnv, platform: FakePlatform, merchant: { ref: string; merchantNo: string }) {
  const no = `${merchant.ref.toUpperCase()}-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '25', merchantNo: merchant.merchantNo });
  platform.setOrder(
    platformOrder({
      orderNo: `P${no}`,
      merchantNo: merchant.merchantNo,
      merchantOrderNo: no,
      type: 'payin',
      state: 6,
      amountJson: '25',
    }),
  );
  const event: CallbackJobInput = {
    ...payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '25' }),
    merchantNo: merchant.merchantNo,
  };
  return { no, event, jobId: callbackJobId('payin', event.orderNo, event.state) };
}

const add = (queue: Queue<CallbackJobInput>, event: CallbackJobInput, jobId: string) =>
  queue.add(event.kind, event, { ...callbackJobOptions, jobId });

const finished = (queue: Queue<CallbackJobInput>, jobId: string) =>
  waitFor(
    async () => {
      const job = await queue.getJob(jobId);
      return job?.finishedOn ? job : undefined;
    },
    { timeoutMs: 15_000, message: `job ${jobId} did not finish` },
  );

describe('a lane per merchant', () => {
  it('credits each merchant on its own queue, through its own platform, asked with its own number', async ({
    env,
    platforms,
    lanes,
  }) => {
    const a = await releasedPayin(env, platforms.a, A);
    const b = await releasedPayin(env, platforms.b, B);
    await add(lanes.queue('a'), a.event, a.jobId);
    await add(lanes.queue('b'), b.event, b.jobId);
    expect((await finished(lanes.queue('a'), a.jobId)).returnvalue).toMatchObject({ outcome: 'credited' });
    expect((await finished(lanes.queue('b'), b.jobId)).returnvalue).toMatchObject({ outcome: 'credited' });
    // Each platform knows one number and refuses any other: a credit means the lane asked its own, at its own URL.
    expect([platforms.a.hits.get(a.no), platforms.b.hits.get(a.no)]).toEqual([1, undefined]);
    expect([platforms.b.hits.get(b.no), platforms.a.hits.get(b.no)]).toEqual([1, undefined]);
    expect((await orderState(env.db.db, a.no)).ledger).toHaveLength(1);
    expect((await orderState(env.db.db, b.no)).ledger).toHaveLength(1);
  });

  it("never settles another merchant's job: b's number on a's queue goes to review, unasked and uncredited", async ({
    env,
    platforms,
    lanes,
  }) => {
    const b = await releasedPayin(env, platforms.b, B);
    await add(lanes.queue('a'), b.event, b.jobId);
    const job = await finished(lanes.queue('a'), b.jobId);
    expect(job.returnvalue).toMatchObject({ status: 'review', code: 'VERIFY_MERCHANT_MISMATCH' });
    expect([platforms.a.hits.get(b.no), platforms.b.hits.get(b.no)]).toEqual([undefined, undefined]);
    const state = await orderState(env.db.db, b.no);
    expect(state.order.status).toBe('pending');
    expect(state.ledger).toHaveLength(0);
    expect((await reviewsFor(env.db.db, b.no)).map((r) => r.reasonCode)).toEqual(['VERIFY_MERCHANT_MISMATCH']);
  });

  it('gives two merchants on one platform host pools of their own: c holding every socket of its pool stops nothing of d', async ({
    env,
    shared,
  }) => {
    const release = shared.platform.hold((no) => no.startsWith('C-'));
    try {
      const cs = await Promise.all([1, 2, 3].map(() => releasedPayin(env, shared.platform, C)));
      for (const c of cs) await add(shared.queue('c'), c.event, c.jobId);
      // Both of c's jobs in flight wait on Get order: both connections of c's pool are taken.
      await waitFor(() => shared.platform.held() === 2, { message: "c's Get orders never reached the platform" });
      const d = await releasedPayin(env, shared.platform, D);
      await add(shared.queue('d'), d.event, d.jobId);
      expect((await finished(shared.queue('d'), d.jobId)).returnvalue).toMatchObject({ outcome: 'credited' });
      expect(shared.platform.held()).toBe(2);
      release();
      for (const c of cs)
        expect((await finished(shared.queue('c'), c.jobId)).returnvalue).toMatchObject({ outcome: 'credited' });
    } finally {
      release();
    }
  });

  it('labels the lanes’ metrics with their refs, and only with configured ones', async ({ env, platforms, lanes }) => {
    const runner: WorkerRunner = lanes.runner;
    // A credit of a's, so that its Get order and callback-to-credit histograms have a series.
    const credit = await releasedPayin(env, platforms.a, A);
    await add(lanes.queue('a'), credit.event, credit.jobId);
    expect((await finished(lanes.queue('a'), credit.jobId)).returnvalue).toMatchObject({ outcome: 'credited' });
    const text = await (await fetch(`http://127.0.0.1:${runner.metricsPort}/metrics`)).text();
    const refs = new Set([...text.matchAll(/merchant="([^"]*)"/g)].map((m) => m[1]));
    expect([...refs].sort()).toEqual(['a', 'b']);
    for (const ref of ['a', 'b']) {
      for (const name of [
        'mcb_worker_jobs_total',
        'mcb_worker_in_flight',
        'mcb_worker_in_flight_limit',
        'mcb_worker_platform_circuit_open',
        'mcb_queue_jobs',
        'mcb_queue_depth_up',
        'mcb_platform_budget_rps',
        'mcb_platform_fleet_breaker_open',
        'mcb_reconcile_recovered_total',
      ])
        expect(text, `${name} of ${ref}`).toMatch(new RegExp(`^${name}\\{[^}]*merchant="${ref}"`, 'm'));
      expect(metricValue(text, 'mcb_worker_in_flight_limit', { merchant: ref })).toBe(2);
    }
    for (const name of ['mcb_callback_to_credit_seconds_count', 'mcb_worker_get_order_duration_seconds_count'])
      expect(metricValue(text, name, { merchant: 'a' }), name).toBeGreaterThanOrEqual(1);
    expect(metricValue(text, 'mcb_callback_to_credit_seconds_count', { merchant: 'b' })).toBe(
      metricValue(text, 'mcb_worker_jobs_total', { merchant: 'b', outcome: 'credited' }),
    );
    // One HELP and TYPE per metric, however many lanes: an exposition Prometheus accepts.
    expect(text.match(/^# TYPE mcb_worker_jobs_total /gm)).toHaveLength(1);
  });

  it("publishes each lane's Get order figures for the console's merchants page, under its merchant's key", async ({
    env,
    platforms,
    lanes,
  }) => {
    const a = await releasedPayin(env, platforms.a, A);
    await add(lanes.queue('a'), a.event, a.jobId);
    await finished(lanes.queue('a'), a.jobId);
    // Every few seconds each lane writes one field (this process) of its merchant's hash: its Get orders of the window.
    const snapshot = await waitFor(
      async () => {
        const fields = await lanes.runner.redis.hgetall(merchantKeys(env.prefix, 'a').laneSnapshots);
        const [value] = Object.values(fields);
        const parsed = value && (JSON.parse(value.slice(value.indexOf(' ') + 1)) as { getOrders: number });
        return parsed && parsed.getOrders >= 1 ? { fields, parsed } : undefined;
      },
      { timeoutMs: 12_000, message: "a's lane wrote no snapshot with its Get order" },
    );
    expect(Object.keys(snapshot.fields)).toHaveLength(1);
    expect(snapshot.parsed).toMatchObject({ getOrderErrors: 0, breaker: 'closed', windowMs: 5000 });
    expect(await lanes.runner.redis.exists(merchantKeys(env.prefix, 'b').laneSnapshots)).toBe(1);
  }, 20_000);
});
