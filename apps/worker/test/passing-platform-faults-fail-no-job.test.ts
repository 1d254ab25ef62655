import {
  createOrder,
  type FakePlatform,
  payinEvent,
  platformOrder,
  startFakePlatform,
  uid,
  useTestEnv,
  waitFor,
} from '@mcb/testkit';
import { callbackJobId, callbackJobOptions, REPLAY_RETRY_OPTIONS } from '@mcb/core/queue';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, orderState, startHarness } from '@mcb/testkit/worker';

// Issue 37: a blip of seconds must not become a failed job that a person has to find and replay.
const env = useTestEnv();

describe('a Get order reply that is not the envelope (HTTP 200 with an HTML maintenance page)', () => {
  let platform: FakePlatform;
  let h: Harness;
  beforeAll(async () => {
    platform = await startFakePlatform();
    h = await startHarness(env, platform.url, {
      platformGuard: { failuresToOpen: 3, openMs: { initial: 50, max: 100 }, maxWaitMs: 200 },
    });
  });
  afterAll(async () => {
    await h?.close();
    await platform?.close();
  });

  it('is transient: the job retries and credits, nothing fails for good', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '20' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '20' }),
    );
    platform.maintenancePageNext(no, 1);
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '20' }))).id!,
    );
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBe(2); // the page, then the answer
    expect((await h.queue.getJobLogs(job.id!)).logs.join('\n')).toMatch(/PLATFORM_BAD_RESPONSE.*not JSON.*text\/html/);
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });
});

describe('the circuit breaker open on Get order', () => {
  let platform: FakePlatform;
  let h: Harness;
  beforeAll(async () => {
    platform = await startFakePlatform();
    h = await startHarness(env, platform.url, {
      platformGuard: { failuresToOpen: 1, openMs: { initial: 100, max: 100 }, maxWaitMs: 100 },
      circuitRedelayMs: 50,
    });
  });
  afterAll(async () => {
    await h?.close();
    await platform?.close();
  });

  it('costs jobs time, not attempts: a job of 2 attempts outlives many breaker waits, then credits', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '30' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '30' }),
    );
    platform.setOutage(503);
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '30' });
    const jobId = callbackJobId('payin', event.orderNo, event.state);
    await h.queue.add('payin', event, { ...callbackJobOptions, attempts: 2, jobId });
    // Five waits on the open breaker (each about 150 ms), noted on the job: more than its two attempts.
    await waitFor(
      async () => (await h.queue.getJobLogs(jobId)).logs.filter((l) => l.includes('PLATFORM_CIRCUIT_OPEN')).length >= 5,
      {
        message: 'the job did not wait on the breaker five times',
      },
    );
    const waiting = (await h.queue.getJob(jobId))!;
    expect(await waiting.getState()).not.toBe('failed');
    expect(waiting.attemptsMade).toBe(0);
    platform.setOutage(undefined);
    const job = await h.settled(jobId);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });

  it('keeps a bound: past circuitWaitBoundMs from first sight a wait counts as an attempt again, and the job fails for good', async () => {
    const bounded = await startHarness(env, platform.url, {
      platformGuard: { failuresToOpen: 1, openMs: { initial: 100, max: 100 }, maxWaitMs: 100 },
      circuitRedelayMs: 50,
      circuitWaitBoundMs: 0,
    });
    try {
      const no = `PI-${uid()}`;
      await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '30' });
      platform.setOutage(503);
      const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '30' });
      const jobId = `bounded-${no}`;
      await bounded.queue.add('payin', event, { ...callbackJobOptions, attempts: 2, jobId });
      const job = await bounded.settled(jobId);
      expect(await job.getState()).toBe('failed');
      expect(job.attemptsMade).toBe(2);
    } finally {
      platform.setOutage(undefined);
      await bounded.close();
    }
  });
});

describe('a replayed job (REPLAY_RETRY_OPTIONS, as replay by filter and the dashboard retry it)', () => {
  let platform: FakePlatform;
  let h: Harness;
  beforeAll(async () => {
    platform = await startFakePlatform();
    h = await startHarness(env, platform.url);
  });
  afterAll(async () => {
    await h?.close();
    await platform?.close();
  });

  it('starts with a fresh retry budget: one more 503 does not fail it for good again', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '40' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '40' }),
    );
    platform.failNext(no, 3, 503);
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '40' });
    const jobId = callbackJobId('payin', event.orderNo, event.state);
    await h.queue.add('payin', event, { ...callbackJobOptions, attempts: 2, jobId });
    const failed = await h.settled(jobId);
    expect(await failed.getState()).toBe('failed');
    expect(failed.attemptsMade).toBe(2);
    // The platform still answers one more 503; the replay must ride it out.
    await failed.retry('failed', REPLAY_RETRY_OPTIONS);
    // The job is read once it has ended (a copy read before would not hold its return value yet).
    const job = await waitFor(async () => {
      const state = await h.queue.getJobState(jobId);
      return state === 'completed' || state === 'failed' ? h.queue.getJob(jobId) : undefined;
    });
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBe(2); // counted afresh: the 503, then the credit
  });
});
