import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, operatorActions, replayJobs, replays } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { startReplayDriver } from '../../apps/console/src/replays/driver.ts';
import { ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// Issue 49: "a replay does what its dry run said". The dry run returns the bound of the set it classified; the start
// posts it back and the replay acts on that set only (or answers 409 PLAN_STALE with a fresh dry run); jobs failing
// while it runs are not swept in. The driver runs only when a test starts it, so what fails when is in the test's hands.

const env = useTestEnv();
let stack: OpsStack;
const logger = createLogger({ name: 'replay-plan-bound-test', level: 'silent' });

beforeAll(async () => {
  stack = await startOpsStack(env, {
    worker: { concurrency: 4 },
    consoleDeps: { operators: OPERATORS, replayDriver: false },
  });
});
afterAll(async () => {
  await stack?.close();
});

interface Plan {
  matched: number;
  counts: Record<string, number>;
  totals: { cls: string; orders: number; amount: string; currency: string | null }[];
  bound: { asOf: string; upToJobId: string | null; jobs: number; digest: string };
}

/** A pay-in whose callback failed for good (Get order answered 500 on its one attempt); Get order then confirms it. */
async function failedPayin(amount: string) {
  const no = uid();
  const o = { merchantOrderNo: `MO-B-${no}`, orderNo: `P-B-${no}` };
  await createOrder(env.db.db, { ...o, kind: 'payin', amount });
  stack.platform.failNext(o.merchantOrderNo, 1, 500);
  const jobId = await stack.add(payinEvent({ ...o, fiatAmount: amount }), 1);
  await waitFor(
    async () =>
      (
        await env.db.db
          .select()
          .from(callbackArrivals)
          .where(and(eq(callbackArrivals.jobId, jobId), eq(callbackArrivals.status, 'failed')))
      )[0],
    { message: `job ${jobId} did not fail` },
  );
  stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: amount }));
  return { ...o, jobId };
}

const api = (payload: Record<string, unknown>) =>
  stack.app.inject({ method: 'POST', url: '/api/replays', headers: bearer('operator'), payload });

async function dryRun(filter: Record<string, string>): Promise<Plan> {
  const res = await api({ filter, dryRun: true });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { plan: Plan }).plan;
}

/** Drive the running replays until `id` ends, then stop the driver. */
async function drive(id: number) {
  const driver = startReplayDriver({ db: env.db.db, queue: stack.queue, logger, pollMs: 100 });
  try {
    await waitFor(
      async () =>
        (await env.db.db.select().from(replays).where(eq(replays.id, id)))[0]?.status === 'finished' || undefined,
      { timeoutMs: 20_000, message: `replay ${id} did not finish` },
    );
  } finally {
    await driver.close();
  }
}

const sentBack = async (id: number) =>
  (await env.db.db.select().from(replayJobs).where(eq(replayJobs.replayId, id))).map((r) => r.jobId).sort();
const credits = async (merchantOrderNos: string[]) =>
  (await Promise.all(merchantOrderNos.map(async (no) => (await ledgerOf(env.db.db, no)).ledger))).flat();

describe('a replay and its dry run', () => {
  it('started after more jobs failed, acts on the dry run set only; its audit row holds the plan totals', async () => {
    // 1. Two failed pay-ins; the dry run says "credit 2 orders, 150.00".
    const filter = { amountMin: '71.00', amountMax: '71.99' };
    const a = await failedPayin('71.10');
    const b = await failedPayin('71.20');
    const plan = await dryRun(filter);
    expect(plan.counts.willApply).toBe(2);
    expect(plan.bound).toMatchObject({ jobs: 2, upToJobId: [a.jobId, b.jobId].sort()[1] });

    // 2. Another job fails after the dry run, before the start.
    const late = await failedPayin('71.30');

    // 3. The start posts the dry run back: the replay covers its two jobs, and says so in the audit.
    const res = await api({ filter, reason: 'the outage is over', ratePerSecond: 50, plan });
    expect(res.statusCode, res.body).toBe(202);
    const { replay } = res.json() as { replay: { id: number; total: number; planAsOf: string; planUpTo: string } };
    expect(replay).toMatchObject({ total: 2, planAsOf: plan.bound.asOf, planUpTo: plan.bound.upToJobId });
    const [audit] = await env.db.db
      .select()
      .from(operatorActions)
      .where(and(eq(operatorActions.action, 'replays.start'), eq(operatorActions.outcome, 'started')));
    expect(audit?.details).toMatchObject({
      replayId: replay.id,
      total: 2,
      plan: { jobs: 2, digest: plan.bound.digest, counts: plan.counts, totals: plan.totals },
    });

    // 4. It sends back and credits those two only; the late one stays failed, for a dry run of its own.
    await drive(replay.id);
    expect(await sentBack(replay.id)).toEqual([a.jobId, b.jobId].sort());
    await waitFor(async () => (await credits([a.merchantOrderNo, b.merchantOrderNo])).length === 2 || undefined, {
      timeoutMs: 20_000,
      message: 'the two planned orders were not credited',
    });
    expect(await credits([late.merchantOrderNo])).toEqual([]);
    const [lateRow] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, late.jobId));
    expect(lateRow?.status).toBe('failed');
    expect((await dryRun(filter)).bound.jobs).toBe(1);
  });

  it('answers 409 PLAN_STALE with a fresh dry run when the set it classified changed, and starts nothing', async () => {
    const filter = { amountMin: '72.00', amountMax: '72.99' };
    const a = await failedPayin('72.10');
    await failedPayin('72.20');
    const plan = await dryRun(filter);
    expect(plan.bound.jobs).toBe(2);
    // One of its jobs was settled meanwhile (retried from elsewhere): the replay would do less than it said.
    await env.db.db
      .update(callbackArrivals)
      .set({ status: 'applied', outcome: 'credited' })
      .where(eq(callbackArrivals.jobId, a.jobId));

    const res = await api({ filter, reason: 'after the fix', plan });
    expect(res.statusCode, res.body).toBe(409);
    const body = res.json() as { code: string; message: string; plan: Plan };
    expect(body.code).toBe('PLAN_STALE');
    expect(body.message).toMatch(/classified 2 failed job\(s\); 1 of that set/);
    expect(body.plan.bound.jobs).toBe(1);
    expect(body.plan.counts.willApply).toBe(1);
    expect(await env.db.db.select().from(replays).where(eq(replays.reason, 'after the fix'))).toEqual([]);
    const refused = await env.db.db
      .select()
      .from(operatorActions)
      .where(and(eq(operatorActions.action, 'replays.start'), eq(operatorActions.outcome, 'failed:PLAN_STALE')));
    expect(refused).toHaveLength(1);

    // The fresh plan starts.
    const again = await api({ filter, reason: 'after the fix', plan: body.plan });
    expect(again.statusCode, again.body).toBe(202);
    expect((again.json() as { replay: { total: number } }).replay.total).toBe(1);
  });

  it('says who cancelled it and why, in GET /api/replays/:id and the list, to a viewer too', async () => {
    const filter = { amountMin: '75.00', amountMax: '75.99' };
    await failedPayin('75.10');
    const res = await api({ filter, reason: 'to be cancelled', plan: await dryRun(filter) });
    const { replay } = res.json() as { replay: { id: number } };
    const cancel = await stack.app.inject({
      method: 'POST',
      url: `/api/replays/${replay.id}/cancel`,
      headers: bearer('admin'),
      payload: { reason: 'wrong window' },
    });
    expect(cancel.statusCode, cancel.body).toBe(200);
    const ended = { status: 'cancelled', endedBy: 'ada.admin@example.com', endReason: 'wrong window' };
    expect(cancel.json()).toMatchObject({ replay: ended });
    const one = await stack.app.inject({ method: 'GET', url: `/api/replays/${replay.id}`, headers: bearer('viewer') });
    expect(one.json()).toMatchObject({ replay: { id: replay.id, ...ended } });
    const list = await stack.app.inject({ method: 'GET', url: '/api/replays', headers: bearer('viewer') });
    expect((list.json() as { replays: { id: number }[] }).replays.find((r) => r.id === replay.id)).toMatchObject(ended);
  });

  it('refuses a posted plan that is not one (400) and starts nothing', async () => {
    const res = await api({ filter: { amountMin: '73.00' }, reason: 'x', plan: { bound: { jobs: 'two' } } });
    expect(res.statusCode, res.body).toBe(400);
    expect(await env.db.db.select().from(replays).where(eq(replays.reason, 'x'))).toEqual([]);
  });

  it('does not sweep in jobs that fail while it runs, started with or without a dry run', async () => {
    const filter = { amountMin: '74.00', amountMax: '74.99' };
    const a = await failedPayin('74.10');
    // 1. Started without a dry run: its set is what had failed by the start.
    const res = await api({ filter, reason: 'no dry run', ratePerSecond: 50 });
    expect(res.statusCode, res.body).toBe(202);
    const { replay } = res.json() as { replay: { id: number; total: number } };
    expect(replay.total).toBe(1);
    // 2. A job matching the filter fails after the start, before the driver reaches it (job ids are not in time order).
    const during = await failedPayin('74.20');
    await drive(replay.id);
    expect(await sentBack(replay.id)).toEqual([a.jobId]);
    const [row] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, during.jobId));
    expect(row?.status).toBe('failed');
  });
});
