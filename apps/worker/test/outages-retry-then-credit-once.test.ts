import { createOrder, payinEvent, platformOrder, startTcpProxy, uid, waitFor } from '@mcb/testkit';
import { orderState, startHarness, workerTest } from '@mcb/testkit/worker';
import { describe, expect } from 'vitest';

const it = workerTest
  // The workers reach Postgres only through a proxy this file controls; the shared server is never touched.
  .extend('proxy', { scope: 'file' }, async ({ env }, { onCleanup }) => {
    const target = new URL(env.databaseUrl);
    const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    onCleanup(() => proxy.close());
    return proxy;
  })
  .extend('harnessOptions', { scope: 'file' }, ({ env, proxy }) => {
    const viaProxy = new URL(env.databaseUrl);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    return { workerDatabaseUrl: viaProxy.toString(), instances: 2 };
  });

describe('transient failures are retried until the work is done, once', () => {
  it('credits after Get order fails twice with HTTP 500', async ({ env, platform, h }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '42' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '42' }),
    );
    platform.failNext(no, 2, 500);
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '42' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBe(3);
    expect(platform.hits.get(no)).toBe(3);
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
    const retries = await h.metrics.retries.get();
    expect(retries.values.find((v) => v.labels.code === 'PLATFORM_HTTP_ERROR')?.value).toBeGreaterThanOrEqual(2);
  });

  it('treats HTTP 3xx/4xx from Get order as "ask again later": credits after two 404s, never fails the job at once', async ({
    env,
    platform,
    h,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '9' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '9' }),
    );
    platform.failNext(no, 2, 404);
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '9' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBe(3);
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });

  it('sends an event whose Get order keeps answering 4xx past CONFIRM_MAX_WAIT to review, not to the failed list', async ({
    env,
    platform,
  }) => {
    const bounded = await startHarness(env, platform.url, { confirmMaxWaitMs: 100, releaseReviewedJobIds: false });
    try {
      const no = `PI-${uid()}`;
      await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '9' });
      platform.failNext(no, 1_000, 403);
      const job = await bounded.settled(
        (await bounded.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '9' }))).id!,
      );
      expect(await job.getState()).toBe('completed');
      expect(job.returnvalue).toMatchObject({ status: 'review', code: 'PLATFORM_HTTP_ERROR' });
      expect((await orderState(env.db.db, no)).order.status).toBe('pending');
      platform.failNext(no, 0, 403);
    } finally {
      await bounded.close();
    }
  });

  it('retries jobs while Postgres is unreachable and credits each once when it is back', async ({
    env,
    platform,
    h,
    proxy,
  }) => {
    const nos = Array.from({ length: 5 }, () => `PI-${uid()}`);
    for (const no of nos) {
      await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '8.10' });
      platform.setOrder(
        platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '8.1' }),
      );
    }
    // 1. Cut the workers off Postgres, then queue the events.
    await proxy.cut();
    const jobs = await Promise.all(
      nos.map((no) => h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '8.10' }))),
    );
    // 2. Every job has failed at least twice on the outage and is waiting to retry, none has failed for good.
    await waitFor(
      async () => {
        const current = await Promise.all(jobs.map((j) => h.queue.getJob(j.id!)));
        return current.every((j) => j && j.attemptsMade >= 2 && !j.finishedOn);
      },
      { timeoutMs: 15_000, message: 'jobs retrying on the outage' },
    );
    const failedEarly = await Promise.all(jobs.map((j) => h.queue.getJob(j.id!)));
    expect(
      failedEarly.every((j) => /DB_UNAVAILABLE|ECONNREFUSED|Connection terminated/.test(j?.failedReason ?? '')),
    ).toBe(true);
    // The stored reason is the driver's message, never drizzle's query text with the record's fields as parameters.
    expect(failedEarly.some((j) => /Failed query|params:/.test(j?.failedReason ?? ''))).toBe(false);
    // 3. Postgres is back: each job completes and credits once.
    await proxy.restore();
    const done = await Promise.all(jobs.map((j) => h.settled(j.id!, 20_000)));
    for (const job of done) expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    for (const no of nos) {
      const s = await orderState(env.db.db, no);
      expect(s.order.status).toBe('credited');
      expect(s.ledger).toHaveLength(1);
      expect(s.receipts).toHaveLength(1);
    }
  });

  it('rides out a cut in the middle of work with connections already open in the pool', async ({
    env,
    platform,
    h,
    proxy,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '3' });
    // Warm the pools, then cut: idle clients die under the workers' feet.
    const warm = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: warm, kind: 'payin', amount: '1' });
    platform.setOrder(
      platformOrder({ orderNo: `P${warm}`, merchantOrderNo: warm, type: 'payin', state: 6, amountJson: '1' }),
    );
    await h.settled((await h.add(payinEvent({ orderNo: `P${warm}`, merchantOrderNo: warm, fiatAmount: '1' }))).id!);
    await proxy.cut();
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '3' }),
    );
    const added = await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '3' }));
    await waitFor(async () => ((await h.queue.getJob(added.id!))?.attemptsMade ?? 0) >= 1, {
      message: 'a failed attempt',
    });
    await proxy.restore();
    const job = await h.settled(added.id!, 20_000);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });
});
