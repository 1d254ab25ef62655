import { callbackArrivals, createDb, type Db } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobId, callbackJobOptions, callbackJobSchema, retryKeepingStory } from '@mcb/core/queue';
import { createOrder, payinEvent, startFakePlatform, uid, useTestEnv, waitFor, type FakePlatform } from '@mcb/testkit';
import type { Job } from 'bullmq';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replayCandidates } from '../../apps/console/src/replays/plan.ts';
import { createArrivalRecorder } from '../../apps/worker/src/arrival-recorder.ts';
import { startHarness, type Harness } from '@mcb/testkit/worker';
import { startTcpProxy, type TcpProxy } from '@mcb/testkit';

// Issue 48: replay by filter, its dry run and the Callbacks page read a job's `failed` row, which went missing when
// the worker stopped before Postgres came back (the row lived only in its memory), and when workers' clocks differed
// (reports were ordered by the host's clock). BullMQ's failed set is now what the rows are checked against, and
// reports are ordered by the job's progress.
const env = useTestEnv();
const silent = createLogger({ name: 'failed-rows-test', level: 'silent' });
let platform: FakePlatform;
let proxy: TcpProxy;

beforeAll(async () => {
  platform = await startFakePlatform();
  const target = new URL(env.databaseUrl);
  proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
});
afterAll(async () => {
  await proxy?.close();
  await platform?.close();
});

const rowOf = async (jobId: string) =>
  (await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, jobId)))[0];
/** What replay by filter sends back for this merchant order number (the driver's own query). */
const replayFinds = async (merchantOrderNo: string) =>
  (await replayCandidates(env.db.db, { merchantOrderNo }, null, 100)).map((c) => c.jobId);

describe('a job that failed for good is found by replay by filter', () => {
  it('when its worker stopped while Postgres was down (the row never written): the next worker writes it', async () => {
    const through = new URL(env.databaseUrl);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    const pool: Db = createDb(through.toString(), { max: 2, connectionTimeoutMs: 500 });
    let first: Harness | undefined = await startHarness(env, platform.url, {
      workerDatabaseUrl: through.toString(),
      arrivals: createArrivalRecorder(pool.db, silent, { retryFinalMs: 100 }),
    });
    let next: Harness | undefined;
    try {
      const no = `MO-STOP-${uid()}`;
      // 1. Postgres goes away; the job uses up its attempts meanwhile and fails for good.
      await proxy.cut();
      const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '5' });
      const jobId = callbackJobId('payin', event.orderNo, event.state);
      await first.queue.add('payin', event, { ...callbackJobOptions, attempts: 2, jobId });
      expect(await (await first.settled(jobId)).getState()).toBe('failed');
      // 2. Its worker stops before Postgres is back: the row it kept is lost with it.
      await first.close();
      first = undefined;
      await proxy.restore();
      expect(await rowOf(jobId)).toBeUndefined();
      expect(await replayFinds(no)).toEqual([]);

      // 3. A worker starts: it checks BullMQ's failed set against the rows and writes the missing one.
      next = await startHarness(env, platform.url);
      await waitFor(async () => (await replayFinds(no)).includes(jobId), {
        timeoutMs: 15_000,
        message: 'replay by filter never found the failed job',
      });
      expect(await rowOf(jobId)).toMatchObject({ status: 'failed', attempts: 2, merchantOrderNo: no });
    } finally {
      await first?.close();
      await next?.close();
      await pool.close();
    }
  });

  it('when its failure was reported from a host whose clock is 5 s behind the host of its retry', async () => {
    const no = `MO-SKEW-${uid()}`;
    const event = callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '7' }));
    const jobId = callbackJobId('payin', event.orderNo, event.state);
    const job = (attemptsMade: number) => ({ id: jobId, attemptsMade, timestamp: Date.now() }) as unknown as Job;
    const onTime = createArrivalRecorder(env.db.db, silent);
    const behind = createArrivalRecorder(env.db.db, silent, { now: () => Date.now() - 5000 });
    // Attempt 1 fails on one host, attempt 2 fails for good on the other, a moment later by the real clock.
    onTime.settled(job(0), event, { status: 'retrying', code: 'PLATFORM_HTTP_ERROR' });
    await onTime.flush();
    behind.settled(job(2), event, { status: 'failed', code: 'PLATFORM_HTTP_ERROR', attempts: 2 });
    await behind.flush();
    expect(await rowOf(jobId)).toMatchObject({ status: 'failed', attempts: 2 });
    expect(await replayFinds(no)).toEqual([jobId]);

    // The first host's report again (kept through an outage and written late, stamped by the later clock): no effect.
    onTime.settled(job(0), event, { status: 'retrying', code: 'PLATFORM_HTTP_ERROR' });
    await onTime.flush();
    expect(await replayFinds(no)).toEqual([jobId]);
  });

  it('after a replay, the new run passes the old run`s rows (its attempts go on from the old run`s)', async () => {
    const h = await startHarness(env, platform.url);
    try {
      platform.setOutage(503);
      const no = `MO-RUN-${uid()}`;
      await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '9', currency: 'INR' });
      const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '9' });
      const jobId = callbackJobId('payin', event.orderNo, event.state);
      await h.queue.add('payin', event, { ...callbackJobOptions, attempts: 2, jobId });
      await h.settled(jobId);
      await waitFor(async () => (await rowOf(jobId))?.status === 'failed', { message: 'no failed row' });
      const oldRun = (await rowOf(jobId))!;
      expect(oldRun.attempts).toBe(2);

      // Replayed while the platform still fails: the new run fails for good again, after 2 more attempts.
      await retryKeepingStory((await h.queue.getJob(jobId))!, 'failed');
      await waitFor(async () => (await rowOf(jobId))?.attempts === 4, {
        message: 'the new run`s rows did not replace the old run`s',
      });
      expect(await rowOf(jobId)).toMatchObject({ status: 'failed', attempts: 4 });
      expect(await replayFinds(no)).toEqual([jobId]);

      // The old run's `failed` report, written late (a kept row), stays behind the new run's.
      const late = createArrivalRecorder(env.db.db, silent, { now: () => Date.now() + 60_000 });
      const oldJob = { id: jobId, attemptsMade: 2, timestamp: Date.now() } as unknown as Job;
      late.settled(oldJob, callbackJobSchema.parse(event), { status: 'failed', code: 'OLD_RUN', attempts: 2 });
      await late.flush();
      expect(await rowOf(jobId)).toMatchObject({ status: 'failed', attempts: 4 });
      expect((await rowOf(jobId))!.lastCode).not.toBe('OLD_RUN');
    } finally {
      platform.setOutage(undefined);
      await h.close();
    }
  });
});
