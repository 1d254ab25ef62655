import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { operatorActions } from '@mcb/core/db';
import { browserHeaders, ledgerOf, login, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let cookie: string;

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true });
  cookie = await login(stack.app);
});
afterAll(async () => {
  await stack?.close();
});

/** PUT a dashboard action as bull-board's page does (session cookie, same origin). */
const put = (url: string) =>
  stack.app.inject({
    method: 'PUT',
    url,
    headers: { ...browserHeaders(cookie), 'x-reason': encodeURIComponent('customer paid: Get order fixed — retry') },
  });

async function settled(jobId: string, state: 'completed' | 'failed', sinceFinishedOn = 0) {
  return waitFor(
    async () => {
      const job = await stack.queue.getJob(jobId);
      return job && job.finishedOn && job.finishedOn > sinceFinishedOn && (await job.getState()) === state
        ? job
        : undefined;
    },
    { timeoutMs: 10_000, message: `job ${jobId} did not become ${state}` },
  );
}

async function creditedPayin(amount = '100.50') {
  const no = uid();
  const merchantOrderNo = `MO-${no}`;
  const orderNo = `P-${no}`;
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount });
  stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: amount }));
  return { merchantOrderNo, orderNo, event: payinEvent({ orderNo, merchantOrderNo, fiatAmount: amount }) };
}

describe('replay from the dashboard', () => {
  it('retrying the same completed job twice leaves exactly one credit', async () => {
    const { merchantOrderNo, event } = await creditedPayin();
    const jobId = await stack.add(event);
    let job = await settled(jobId, 'completed');
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });

    for (let i = 0; i < 2; i++) {
      const res = await put(`/queues/api/queues/callbacks/${jobId}/retry`);
      expect(res.statusCode, res.body).toBe(204);
      job = await settled(jobId, 'completed', job.finishedOn);
      expect(job.returnvalue).toMatchObject({ status: 'duplicate' });
    }
    const { order, ledger } = await ledgerOf(env.db.db, merchantOrderNo);
    expect(order.status).toBe('credited');
    expect(ledger).toHaveLength(1);
  });

  it('a failed job retried twice after its cause is fixed credits once; it was listed as failed with its reason and attempts', async () => {
    const { merchantOrderNo, orderNo, event } = await creditedPayin('42.00');
    // 1. The platform answers 500 to every Get order: both attempts fail, the job ends failed.
    stack.platform.failNext(merchantOrderNo, 1_000, 500);
    const jobId = await stack.add(event, 2);
    let job = await settled(jobId, 'failed');

    // 2. The dashboard's failed list shows it, with the reason and attempts, and the data through the formatter.
    const list = await stack.app.inject({
      method: 'GET',
      url: '/queues/api/queues?activeQueue=callbacks&status=failed&page=1&jobsPerPage=50',
      headers: { cookie },
    });
    expect(list.statusCode).toBe(200);
    const queue = (list.json() as { queues: { name: string; jobs: Record<string, unknown>[] }[] }).queues.find(
      (q) => q.name === 'callbacks',
    )!;
    const shown = queue.jobs.find((j) => j.id === jobId)!;
    expect(shown).toMatchObject({ attempts: 2 });
    expect(String(shown.failedReason)).toMatch(/PLATFORM_HTTP_ERROR|500/);
    expect(shown.data).toEqual({
      kind: 'payin',
      orderNo,
      state: 6,
      merchantOrderNo,
      receivedAt: event.receivedAt,
      source: 'callback',
      hiddenFields: ['fiatAmount', 'merchantNo', 'payTime', 'quantity'],
    });

    // 3. Fix the cause, retry twice: the second retry finds the job waiting/active (refused) or completed (duplicate).
    stack.platform.failNext(merchantOrderNo, 0, 500);
    const first = await put(`/queues/api/queues/callbacks/${jobId}/retry`);
    expect(first.statusCode, first.body).toBe(204);
    const second = await put(`/queues/api/queues/callbacks/${jobId}/retry`);
    expect([204, 400]).toContain(second.statusCode);
    job = await settled(jobId, 'completed', job.finishedOn);
    // Whichever run applied it, the other (if any) was a duplicate; one more retry of the completed job changes nothing.
    const third = await put(`/queues/api/queues/callbacks/${jobId}/retry`);
    expect(third.statusCode).toBe(204);
    await settled(jobId, 'completed', job.finishedOn);

    const { order, ledger } = await ledgerOf(env.db.db, merchantOrderNo);
    expect(order.status).toBe('credited');
    expect(ledger).toHaveLength(1);
  });

  it('retry-all is refused with the way to the replay wizard: nothing is sent back and no row is written', async () => {
    // It sent every failed job back at once, without a dry run or a rate, and recorded no count, no job ids and
    // nothing on the orders' stories (issue 49): bulk retry is the replay wizard's.
    const a = await creditedPayin('10.00');
    stack.platform.failNext(a.merchantOrderNo, 1_000, 503);
    const id = await stack.add(a.event, 1);
    await settled(id, 'failed');
    const rows = (await env.db.db.select().from(operatorActions)).length;
    for (const status of ['failed', 'completed']) {
      const res = await put(`/queues/api/queues/callbacks/retry/${status}`);
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json()).toMatchObject({ code: 'FORBIDDEN', message: expect.stringContaining('/replays/new') });
    }
    expect(await stack.queue.getJobState(id)).toBe('failed');
    expect(await env.db.db.select().from(operatorActions)).toHaveLength(rows);
    stack.platform.failNext(a.merchantOrderNo, 0, 503);
  });

  it('retry of one job gives the job a fresh retry budget: one more 503 does not fail it for good again', async () => {
    const a = await creditedPayin('11.00');
    const b = await creditedPayin('12.00');
    for (const x of [a, b]) stack.platform.failNext(x.merchantOrderNo, 2, 503);
    const ids = [await stack.add(a.event, 2), await stack.add(b.event, 2)];
    const failed = await Promise.all(ids.map((id) => settled(id, 'failed')));
    expect(failed.map((j) => j.attemptsMade)).toEqual([2, 2]);
    // One more 503 each after the replay: with the old attempt count (2 of 2) it would be the last attempt.
    for (const x of [a, b]) stack.platform.failNext(x.merchantOrderNo, 1, 503);
    expect((await put(`/queues/api/queues/callbacks/${ids[0]}/retry`)).statusCode).toBeLessThan(300);
    expect((await put(`/queues/api/queues/callbacks/${ids[1]}/retry`)).statusCode).toBeLessThan(300);
    const done = await Promise.all(ids.map((id, i) => settled(id, 'completed', failed[i]!.finishedOn)));
    expect(done.map((j) => j.attemptsMade)).toEqual([2, 2]);
    for (const x of [a, b]) expect((await ledgerOf(env.db.db, x.merchantOrderNo)).ledger).toHaveLength(1);
  });
});
