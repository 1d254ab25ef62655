import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, reviews } from '@mcb/core/db';
import { callbackJobId, type CallbackJobInput, merchantKeys } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// Issue 48: where the replay's dry run and the worker parted. Each case is a failed job; the dry run says what its
// replay will do, and the replay then does it: one decision (decide.ts), worded by the preview, acted on by the worker.

const env = useTestEnv();
let stack: OpsStack;
let redis: Redis;
const CAP = 1;

type Plan = {
  counts: Record<string, number>;
  samples: Record<string, { jobId: string; code: string | null }[]>;
  totals: { cls: string; target: string | null; currency: string | null; orders: number; amount: string }[];
};

beforeAll(async () => {
  redis = createRedis(env.redisUrl, 'worker');
  stack = await startOpsStack(env, {
    worker: { concurrency: 4, maxUnknownWaiting: CAP },
    consoleDeps: { operators: OPERATORS, redis },
    configEnv: { WORKER_MAX_UNKNOWN_WAITING: String(CAP) },
  });
});
afterAll(async () => {
  await stack?.close();
  await redis?.quit();
});

/** A pay-in of ours and its state-`state` event, with fresh numbers. */
async function payin(prefix: string, amount = '30.00', state = 6) {
  const no = uid();
  const o = { merchantOrderNo: `${prefix}-${no}`, orderNo: `P${prefix}-${no}` };
  await createOrder(env.db.db, { ...o, kind: 'payin', amount });
  return { ...o, event: payinEvent({ ...o, fiatAmount: amount, state }) };
}

/** Enqueue the event with `attempts` and wait until its job has failed for good. */
async function failedJob(event: CallbackJobInput, attempts: number): Promise<string> {
  const jobId = await stack.add(event, attempts);
  await waitFor(
    async () =>
      (
        await env.db.db
          .select()
          .from(callbackArrivals)
          .where(and(eq(callbackArrivals.jobId, jobId), eq(callbackArrivals.status, 'failed')))
      )[0],
    { timeoutMs: 20_000, message: `job ${jobId} did not fail` },
  );
  return jobId;
}

async function dryRun(merchantOrderNo: string): Promise<Plan> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/api/replays',
    headers: bearer('operator'),
    payload: { filter: { merchantOrderNo }, dryRun: true },
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { plan: Plan }).plan;
}

async function replay(merchantOrderNo: string): Promise<void> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/api/replays',
    headers: bearer('operator'),
    payload: { filter: { merchantOrderNo }, reason: 'as the dry run said' },
  });
  expect(res.statusCode, res.body).toBe(202);
}

function reviewOf(orderNo: string) {
  return waitFor(async () => (await env.db.db.select().from(reviews).where(eq(reviews.orderNo, orderNo)))[0], {
    timeoutMs: 20_000,
    message: `no review of ${orderNo}`,
  });
}

describe('the replay dry run and the worker decide alike', () => {
  it('a code-0 Get order without data leaves the job waiting, not failed; the dry run says "back to retrying"', async () => {
    // 1. The worker: Get order answers {"code":0,"data":null}. The first attempt waits (as for a 404); the second,
    //    the job's last, decides: review. Never failed for good on the first attempt.
    const g = await payin('GARBLED');
    stack.platform.refuse(g.merchantOrderNo, 0, 'success');
    const jobId = await stack.add(g.event, 2);
    // A reviewed job is removed from the queue; its arrival row keeps how it ended.
    const arrival = await waitFor(
      async () => {
        const [row] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, jobId));
        return row && ['review', 'failed'].includes(row.status) ? row : undefined;
      },
      { timeoutMs: 20_000, message: `job ${jobId} did not end` },
    );
    expect(arrival).toMatchObject({ status: 'review', attempts: 2 });
    expect((await reviewOf(g.orderNo)).reasonCode).toBe('PLATFORM_BAD_RESPONSE');

    // 2. A job that failed (500s), whose Get order now answers code 0 without data: the dry run says it goes back to
    //    waiting, and the replay waits (then reviews on its last attempt) instead of failing again at once.
    const h = await payin('GARBLED2');
    stack.platform.failNext(h.merchantOrderNo, 2, 500);
    const failed = await failedJob(h.event, 2);
    stack.platform.refuse(h.merchantOrderNo, 0, 'success');
    const plan = await dryRun(h.merchantOrderNo);
    expect(plan.counts).toMatchObject({ stillPending: 1, willFailAgain: 0, willReview: 0 });
    expect(plan.samples.stillPending).toEqual([
      expect.objectContaining({ jobId: failed, code: 'PLATFORM_BAD_RESPONSE' }),
    ]);
    await replay(h.merchantOrderNo);
    expect((await reviewOf(h.orderNo)).reasonCode).toBe('PLATFORM_BAD_RESPONSE');
  });

  it('counts two failed jobs of one order as one order, its amount once, and the replay credits it once', async () => {
    // 1. States 3 and 6 of one pay-in, both failed (one attempt each, Get order answering 500).
    const d = await payin('TWOJOBS', '100.00');
    stack.platform.failNext(d.merchantOrderNo, 2, 500);
    const three = payinEvent({ ...d, fiatAmount: '100.00', state: 3 });
    await failedJob(three, 1);
    await failedJob(d.event, 1);
    stack.platform.setOrder(platformOrder({ ...d, type: 'payin', state: 6, amountJson: '100.00' }));

    // 2. Both jobs would apply; the money is one order's.
    const plan = await dryRun(d.merchantOrderNo);
    expect(plan.counts).toMatchObject({ willApply: 2 });
    expect(plan.totals.filter((t) => t.cls === 'willApply')).toEqual([
      expect.objectContaining({ target: 'credited', currency: 'PHP', orders: 1, amount: '100' }),
    ]);

    // 3. The replay: one credit of 100.00.
    await replay(d.merchantOrderNo);
    await waitFor(async () => ((await ledgerOf(env.db.db, d.merchantOrderNo)).ledger.length > 0 ? true : undefined), {
      timeoutMs: 20_000,
      message: 'no credit',
    });
    for (const state of [3, 6]) {
      await waitFor(async () => (await stack.queue.getJob(callbackJobId('payin', d.orderNo, state)))?.finishedOn, {
        timeoutMs: 20_000,
        message: `job of state ${state} did not finish`,
      });
    }
    const { order, ledger } = await ledgerOf(env.db.db, d.merchantOrderNo);
    expect(order.status).toBe('credited');
    expect(ledger).toEqual([expect.objectContaining({ entryType: 'payin_credit', amount: '100.00' })]);
  });

  it('with CALLBACK_JOB_ATTEMPTS=1: "not final" goes to review, and a Get order that fails again fails the job again', async () => {
    // 1. One attempt, failed; Get order now reports the order not final. The replay's only attempt is its last: the
    //    worker decides now (review), and so does the dry run.
    const a = await payin('ONEATTEMPT');
    stack.platform.failNext(a.merchantOrderNo, 1, 500);
    const jobId = await failedJob(a.event, 1);
    stack.platform.setOrder(platformOrder({ ...a, type: 'payin', state: 1, amountJson: '30.00' }));
    const plan = await dryRun(a.merchantOrderNo);
    expect(plan.counts).toMatchObject({ willReview: 1, stillPending: 0 });
    expect(plan.samples.willReview).toEqual([expect.objectContaining({ jobId, code: 'VERIFY_NOT_FINAL' })]);
    await replay(a.merchantOrderNo);
    expect((await reviewOf(a.orderNo)).reasonCode).toBe('VERIFY_NOT_FINAL');

    // 2. Get order still failing (500: the job's attempt, the dry run's, the replay's): it fails again at once.
    const b = await payin('ONEATTEMPT-DOWN');
    stack.platform.failNext(b.merchantOrderNo, 3, 500);
    const failed = await failedJob(b.event, 1);
    const again = await dryRun(b.merchantOrderNo);
    expect(again.counts).toMatchObject({ willFailAgain: 1, stillPending: 0 });
    expect(again.samples.willFailAgain).toEqual([
      expect.objectContaining({ jobId: failed, code: 'PLATFORM_HTTP_ERROR' }),
    ]);
    await replay(b.merchantOrderNo);
    await waitFor(async () => ((stack.platform.hits.get(b.merchantOrderNo) ?? 0) >= 3 ? true : undefined), {
      timeoutMs: 20_000,
      message: 'the replay did not ask Get order',
    });
    await waitFor(
      async () => ((await (await stack.queue.getJob(failed))?.getState()) === 'failed' ? true : undefined),
      {
        timeoutMs: 20_000,
        message: 'the replayed job did not fail again',
      },
    );
  });

  it('past the unknown-order cap, an event whose order is unknown goes to review in the dry run and the replay', async () => {
    // 1. A failed job (500s) whose order is then registered under another number: its order is unknown now.
    const u = await payin('UNKNOWN');
    stack.platform.failNext(u.merchantOrderNo, 2, 500);
    const jobId = await failedJob(u.event, 2);
    await env.db.pool.query(
      `update orders set merchant_order_no = merchant_order_no || '-other' where merchant_order_no = $1`,
      [u.merchantOrderNo],
    );
    // 2. The cap (WORKER_MAX_UNKNOWN_WAITING=1) is taken by another job waiting for its order.
    const key = merchantKeys(env.prefix).unknownOrderWaiting;
    await redis.zadd(key, Date.now(), 'another-job');
    try {
      const plan = await dryRun(u.merchantOrderNo);
      expect(plan.counts).toMatchObject({ willReview: 1, stillPending: 0 });
      expect(plan.samples.willReview).toEqual([expect.objectContaining({ jobId, code: 'VERIFY_ORDER_UNKNOWN' })]);
      // 3. The replay: the worker finds the cap full and decides now.
      await replay(u.merchantOrderNo);
      expect((await reviewOf(u.orderNo)).reasonCode).toBe('VERIFY_ORDER_UNKNOWN');
      // 4. With room in the cap the same job would wait for its order: the dry run says so.
      await redis.del(key);
      const v = await payin('UNKNOWN2');
      stack.platform.failNext(v.merchantOrderNo, 2, 500);
      await failedJob(v.event, 2);
      await env.db.pool.query(
        `update orders set merchant_order_no = merchant_order_no || '-other' where merchant_order_no = $1`,
        [v.merchantOrderNo],
      );
      const roomy = await dryRun(v.merchantOrderNo);
      expect(roomy.counts).toMatchObject({ willReview: 0, stillPending: 1 });
      expect(roomy.samples.stillPending).toEqual([expect.objectContaining({ code: 'VERIFY_ORDER_UNKNOWN' })]);
    } finally {
      await redis.del(key);
    }
  });
});
