import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, ledgerEntries, operatorActions, orders, replays } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobSchema } from '@mcb/core/queue';
import { applyEvent } from '@mcb/settlement';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { createRedis } from '@mcb/core/redis';
import { and, eq, inArray, like, sql } from 'drizzle-orm';
import { createCallbackWorker } from '../../apps/worker/src/index.ts';
import { OPERATORS, bearer, type TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
const logger = createLogger({ name: 'replay-test', level: 'silent' });

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: { concurrency: 16 }, consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await stack?.close();
});

const api = (role: keyof typeof TOKENS, method: 'GET' | 'POST', url: string, payload?: unknown) =>
  stack.app.inject({
    method,
    url,
    headers: bearer(role),
    ...(payload === undefined ? {} : { payload: payload as object }),
  });

/**
 * A pay-in whose callback failed for good (Get order answered 500 on both its attempts: a replay's first attempt is
 * not its last, so "not final" goes back to retrying).
 */
async function failedPayin(tag: string, amount = '30.00') {
  const no = uid();
  const o = { merchantOrderNo: `${tag}-${no}`, orderNo: `P${tag}-${no}` };
  await createOrder(env.db.db, { ...o, kind: 'payin', amount });
  stack.platform.failNext(o.merchantOrderNo, 2, 500);
  const event = payinEvent({ ...o, fiatAmount: amount });
  const jobId = await stack.add(event, 2);
  await waitFor(
    async () =>
      (
        await env.db.db
          .select()
          .from(callbackArrivals)
          .where(and(eq(callbackArrivals.jobId, jobId), eq(callbackArrivals.status, 'failed')))
      )[0],
    {
      message: `job ${jobId} did not fail`,
    },
  );
  return { ...o, jobId, event, amount };
}

const creditsOf = async (merchantOrderNos: string[]) =>
  env.db.db
    .select({ no: orders.merchantOrderNo, n: sql<number>`count(${ledgerEntries.id})::int` })
    .from(orders)
    .leftJoin(ledgerEntries, eq(ledgerEntries.orderId, orders.id))
    .where(inArray(orders.merchantOrderNo, merchantOrderNos))
    .groupBy(orders.merchantOrderNo);

describe('replay dry run', () => {
  it('classifies each failed job against the receipt, our order and Get order, and changes nothing', async () => {
    const tag = `D${uid()}`;
    const apply = await failedPayin(tag);
    const applied = await failedPayin(tag);
    const mismatch = await failedPayin(tag);
    const pending = await failedPayin(tag);
    stack.platform.setOrder(
      platformOrder({
        orderNo: apply.orderNo,
        merchantOrderNo: apply.merchantOrderNo,
        type: 'payin',
        state: 6,
        amountJson: '30.00',
      }),
    );
    stack.platform.setOrder(
      platformOrder({
        orderNo: applied.orderNo,
        merchantOrderNo: applied.merchantOrderNo,
        type: 'payin',
        state: 6,
        amountJson: '30.00',
      }),
    );
    stack.platform.setOrder(
      platformOrder({
        orderNo: mismatch.orderNo,
        merchantOrderNo: mismatch.merchantOrderNo,
        type: 'payin',
        state: 6,
        amountJson: '3.00',
      }),
    );
    stack.platform.setOrder(
      platformOrder({
        orderNo: pending.orderNo,
        merchantOrderNo: pending.merchantOrderNo,
        type: 'payin',
        state: 1,
        amountJson: '30.00',
      }),
    );
    // Credited meanwhile by another path (as a reconciliation sweep would): its failed job is now a no-op.
    expect(
      await applyEvent(callbackJobSchema.parse(applied.event), { db: env.db.db, platform: stack.client, logger }),
    ).toMatchObject({ status: 'applied' });

    const res = await api('operator', 'POST', '/api/replays', {
      filter: { merchantOrderNo: undefined, status: 'failed' },
      dryRun: true,
    });
    expect(res.statusCode, res.body).toBe(200);
    const { plan } = res.json() as {
      plan: {
        matched: number;
        counts: Record<string, number>;
        samples: Record<string, { jobId: string; code: string | null }[]>;
      };
    };
    const mine = (cls: string) => plan.samples[cls]!.filter((s) => s.jobId.includes(tag)).map((s) => [s.jobId, s.code]);
    expect(mine('willApply')).toEqual([[apply.jobId, null]]);
    expect(mine('alreadyApplied')).toEqual([[applied.jobId, null]]);
    expect(mine('willReview')).toEqual([[mismatch.jobId, 'VERIFY_AMOUNT_MISMATCH']]);
    expect(mine('stillPending')).toEqual([[pending.jobId, 'VERIFY_NOT_FINAL']]);
    expect(plan.counts).toMatchObject({
      willApply: 1,
      alreadyApplied: 1,
      willReview: 1,
      stillPending: 1,
      notReplayable: 0,
    });
    expect(plan.matched).toBe(4);

    // Nothing changed: the jobs are still failed, nothing credited but the sweep's, no replay, no audit row.
    for (const j of [apply, mismatch, pending]) expect(await stack.queue.getJobState(j.jobId)).toBe('failed');
    expect(await creditsOf([apply.merchantOrderNo, mismatch.merchantOrderNo])).toEqual(
      expect.arrayContaining([{ no: apply.merchantOrderNo, n: 0 }]),
    );
    expect(await env.db.db.select().from(replays)).toEqual([]);
    expect(await env.db.db.select().from(operatorActions)).toEqual([]);
  });
});

describe('replay rules', () => {
  it('a viewer may not plan, start or cancel (403 naming the role, recorded as denied); starting needs a reason; the rate is bounded', async () => {
    const filter = { status: 'failed', kind: 'payin' };
    for (const [url, payload] of [
      ['/api/replays', { filter, dryRun: true }],
      ['/api/replays', { filter, reason: 'try' }],
    ] as const) {
      const res = await api('viewer', 'POST', url, payload);
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json()).toMatchObject({ code: 'FORBIDDEN' });
    }
    const noReason = await api('operator', 'POST', '/api/replays', { filter });
    expect(noReason.statusCode).toBe(400);
    expect(noReason.json()).toMatchObject({ code: 'REASON_REQUIRED' });
    const blank = await api('operator', 'POST', '/api/replays', { filter, reason: '   ' });
    expect(blank.json()).toMatchObject({ code: 'REASON_REQUIRED' });
    const tooFast = await api('operator', 'POST', '/api/replays', { filter, reason: 'go', ratePerSecond: 101 });
    expect(tooFast.statusCode).toBe(400);
    expect(tooFast.json()).toMatchObject({
      code: 'REQUEST_INVALID',
      message: expect.stringMatching(/CONSOLE_REPLAY_MAX_RATE \(100\)/),
    });
    const notFailed = await api('operator', 'POST', '/api/replays', { filter: { status: 'applied' }, reason: 'go' });
    expect(notFailed.statusCode).toBe(400);
    const unknownField = await api('operator', 'POST', '/api/replays', { filter: { colour: 'red' }, reason: 'go' });
    expect(unknownField.statusCode).toBe(400);
    expect(await env.db.db.select().from(replays)).toEqual([]);
    const denied = await env.db.db.select().from(operatorActions).where(eq(operatorActions.outcome, 'denied'));
    expect(denied.map((d) => [d.operator, d.action])).toEqual([['vera.viewer@example.com', 'replays.start']]);

    // A replay of nothing finishes at once; cancelling it then is a 409, another operator's cancel needs admin.
    const started = await api('operator', 'POST', '/api/replays', {
      filter: { merchantOrderNo: 'no-such-order' },
      reason: 'nothing to do',
    });
    expect(started.statusCode, started.body).toBe(202);
    const { replay } = started.json() as { replay: { id: number; total: number } };
    expect(replay.total).toBe(0);
    expect((await api('viewer', 'GET', `/api/replays/${replay.id}`)).statusCode).toBe(200);
    expect((await api('viewer', 'POST', `/api/replays/${replay.id}/cancel`, { reason: 'x' })).statusCode).toBe(403);
    await waitFor(
      async () => (await api('viewer', 'GET', `/api/replays/${replay.id}`)).json().replay.status === 'finished',
      { message: 'empty replay did not finish' },
    );
    expect((await api('admin', 'POST', `/api/replays/${replay.id}/cancel`, { reason: 'late' })).statusCode).toBe(409);
    expect((await api('viewer', 'GET', '/api/replays/999999')).statusCode).toBe(404);
  });
});

describe('replaying never credits twice', () => {
  it('two replays of the same jobs at once, a second worker, a dashboard retry-all and the sweep path applying the same events: each order credited once', async () => {
    const tag = `C${uid()}`;
    const jobs: Awaited<ReturnType<typeof failedPayin>>[] = [];
    for (let i = 0; i < 20; i++) jobs.push(await failedPayin(tag, '5.00'));
    for (const j of jobs)
      stack.platform.setOrder(
        platformOrder({
          orderNo: j.orderNo,
          merchantOrderNo: j.merchantOrderNo,
          type: 'payin',
          state: 6,
          amountJson: '5.00',
        }),
      );
    const connection = createRedis(env.redisUrl, 'worker');
    const second = createCallbackWorker({
      connection,
      prefix: env.prefix,
      db: env.db.db,
      platform: stack.client,
      logger,
      concurrency: 16,
    });
    try {
      const filter = { status: 'failed', from: new Date(Date.now() - 600_000).toISOString() };
      const [a, b] = await Promise.all([
        api('operator', 'POST', '/api/replays', { filter, ratePerSecond: 100, reason: 'first' }),
        api('admin', 'POST', '/api/replays', { filter, ratePerSecond: 100, reason: 'second' }),
        stack.queue.retryJobs({ state: 'failed' }),
        // The reconciliation sweep's path, on the same events at the same time.
        Promise.all(
          jobs.map((j) =>
            applyEvent(callbackJobSchema.parse(j.event), { db: env.db.db, platform: stack.client, logger }),
          ),
        ),
      ]);
      expect([a!.statusCode, b!.statusCode]).toEqual([202, 202]);
      const ids = [a, b].map((r) => (r!.json() as { replay: { id: number } }).replay.id);
      await waitFor(
        async () => {
          const rows = await env.db.db.select().from(replays).where(inArray(replays.id, ids));
          return rows.every((r) => r.status === 'finished');
        },
        { timeoutMs: 20_000, message: 'the replays did not finish' },
      );
      const credits = await waitFor(
        async () => {
          const c = await creditsOf(jobs.map((j) => j.merchantOrderNo));
          return c.every((x) => x.n >= 1) ? c : undefined;
        },
        { timeoutMs: 20_000, message: 'not every order was credited' },
      );
      expect(credits.map((c) => c.n)).toEqual(jobs.map(() => 1));
      const statuses = await env.db.db
        .select({ status: orders.status })
        .from(orders)
        .where(like(orders.merchantOrderNo, `${tag}-%`));
      expect(statuses.every((s) => s.status === 'credited')).toBe(true);
    } finally {
      await second.close();
      await connection.quit();
    }
  });
});
