import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '@mcb/core/redis';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { createEnqueuer } from '../../apps/ingest/src/enqueue.ts';
import { startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

// "I paid and was not credited": the console tells the whole story of one order's callback in time order, without
// a tracing backend: the callback reaching ingest, each attempt that failed at Get order and why, the attempt that
// settled it, the receipt, the ledger entry, and a later copy of the same callback that changed nothing.
const env = useTestEnv();
let stack: OpsStack;

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true });
});
afterAll(async () => {
  await stack?.close();
});

const get = async (url: string) => {
  const res = await stack.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as {
    timeline: {
      at: string;
      source: string;
      event: string;
      attempt: number | null;
      code: string | null;
      detail: string;
      jobId: string | null;
    }[];
  };
};

describe('the callback timeline', () => {
  it('lists a callback that failed twice at Get order, then was credited: both failures, the success and the ledger entry, in order', async () => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-TL-${no}`, `P-TL-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '75.25' });
    stack.platform.setOrder(
      platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"75.25"' }),
    );
    stack.platform.failNext(merchantOrderNo, 2, 500);

    // 1. The callback reaches ingest (its enqueuer, on the console's queue) and is worked by the worker.
    const enqueuer = createEnqueuer(stack.queue, (await stack.queue.getBackend().client) as unknown as RedisClient, {
      timeoutMs: 2000,
    });
    const event = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '75.25', receivedAt: new Date().toISOString() });
    const jobId = await enqueuer.enqueue(event, { check: 'none' });
    await waitFor(async () => (await stack.queue.getJobState(jobId)) === 'completed', { message: 'not credited' });
    // 2. The platform sends the same callback again later: acknowledged, noted, nothing else.
    await enqueuer.enqueue({ ...event, receivedAt: new Date(Date.now() + 5).toISOString() }, { check: 'none' });

    const { timeline } = await get(`/api/callbacks?orderNo=${orderNo}`);
    expect(timeline.map((e) => [e.source, e.event, e.attempt])).toEqual([
      ['ingest', 'received', null],
      ['job', 'attempt-failed', 1],
      ['job', 'attempt-failed', 2],
      ['job', 'attempt-settled', 3],
      ['receipt', 'applied', null],
      ['ledger', 'ledger-entry', null],
      ['ingest', 'received-again', null],
    ]);
    const times = timeline.map((e) => e.at);
    expect(times).toEqual([...times].sort());
    for (const failed of timeline.filter((e) => e.event === 'attempt-failed')) {
      expect(failed.code).toMatch(/^PLATFORM_/);
      expect(failed.detail).toMatch(/500/);
      expect(failed.jobId).toBe(jobId);
    }
    expect(timeline.find((e) => e.event === 'attempt-settled')!.detail).toBe('attempt 3 settled it: credited');
    expect(timeline.find((e) => e.event === 'applied')!.detail).toMatch(
      /Get order confirmed state 6 and 75\.25; order credited \(from callback\)/,
    );
    expect(timeline.find((e) => e.event === 'ledger-entry')!.detail).toBe('payin_credit 75.25 PHP');

    // The order view tells the same story.
    const view = await get(`/api/orders/${merchantOrderNo}`);
    expect(view.timeline).toEqual(timeline);
  });

  it('shows a job that failed for good with its reason, also on the order view, found by our order number', async () => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-TLF-${no}`, `P-TLF-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '9.00' });
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"9.00"' }));
    stack.platform.failNext(merchantOrderNo, 1_000, 500);
    const jobId = await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '9.00' }), 2);
    await waitFor(async () => (await stack.queue.getJobState(jobId)) === 'failed', { message: 'job did not fail' });
    const { timeline } = await get(`/api/callbacks?orderNo=${orderNo}&merchantOrderNo=${merchantOrderNo}`);
    expect(timeline.map((e) => [e.event, e.attempt])).toEqual([
      ['received', null],
      ['attempt-failed', 1],
      ['attempt-failed', 2],
      ['job-failed', 2],
    ]);
    expect(timeline.at(-1)!.detail).toMatch(/^failed for good after 2 attempt\(s\), kept for replay: /);
    // No receipt and no review yet: the order view finds the job through the worker's record of its arrival.
    expect((await get(`/api/orders/${merchantOrderNo}`)).timeline).toEqual(timeline);
  });
});
