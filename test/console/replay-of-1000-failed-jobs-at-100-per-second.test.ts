import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, ledgerEntries, operatorActions, orders, replays } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobId, callbackJobOptions } from '@mcb/core/queue';
import { payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq, like, sql } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { startReplayDriver, type ReplayDriver } from '../../apps/console/src/replays/driver.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
const drivers: ReplayDriver[] = [];
const logger = createLogger({ name: 'replay-test', level: 'silent' });

beforeAll(async () => {
  // The console's own driver is off: the test holds its driver to see when it stops, and restarts it.
  stack = await startOpsStack(env, {
    worker: { concurrency: 64 },
    consoleDeps: { operators: OPERATORS, replayDriver: false },
  });
});
// Each test's drivers stop with it: one left running (polling every 200 ms) would claim the next test's replay.
afterEach(async () => {
  await Promise.all(drivers.splice(0).map((d) => d.close()));
});
afterAll(async () => {
  await stack?.close();
});

const driver = () => {
  const d = startReplayDriver({ db: env.db.db, queue: stack.queue, logger, pollMs: 200 });
  drivers.push(d);
  return d;
};

/** `n` pay-ins whose only callback failed for good (Get order answered 500), then the platform is fixed. */
async function failedPayins(n: number, amount: string) {
  const tag = `R${uid()}`;
  const from = new Date(Date.now() - 1000).toISOString();
  await env.db.db.execute(
    sql`insert into orders (merchant_order_no, kind, currency, amount, request_hash)
        select ${tag} || '-' || g, 'payin', 'PHP', ${amount}::numeric, md5(${tag} || g) from generate_series(1, ${n}::int) g`,
  );
  const nos = Array.from({ length: n }, (_, i) => ({
    merchantOrderNo: `${tag}-${i + 1}`,
    orderNo: `P${tag}-${i + 1}`,
  }));
  for (const o of nos) stack.platform.failNext(o.merchantOrderNo, 1, 500);
  await stack.queue.addBulk(
    nos.map((o) => ({
      name: 'payin',
      data: payinEvent({ ...o, fiatAmount: amount }),
      opts: { ...callbackJobOptions, attempts: 1, jobId: callbackJobId('payin', o.orderNo, 6) },
    })),
  );
  const failedRows = () =>
    env.db.db
      .select({ n: sql<number>`count(*)::int` })
      .from(callbackArrivals)
      .where(and(like(callbackArrivals.merchantOrderNo, `${tag}-%`), eq(callbackArrivals.status, 'failed')))
      .then((r) => r[0]!.n);
  await waitFor(async () => (await failedRows()) === n, { timeoutMs: 60_000, message: `${n} jobs did not all fail` });
  for (const o of nos) stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: amount }));
  return { tag, from };
}

/** Replay the failed jobs received since `from` (each test's own). */
const startReplay = async (tag: string, from: string, ratePerSecond: number) => {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/api/replays',
    headers: bearer('operator'),
    payload: {
      filter: { status: 'failed', code: 'PLATFORM_HTTP_ERROR', from },
      ratePerSecond,
      reason: `replay ${tag}: Get order was down`,
    },
  });
  expect(res.statusCode, res.body).toBe(202);
  return (res.json() as { replay: { id: number; total: number } }).replay;
};

const replayRow = async (id: number) => (await env.db.db.select().from(replays).where(eq(replays.id, id)))[0]!;

const creditsOf = (tag: string) =>
  env.db.db
    .select({ orderId: ledgerEntries.orderId, n: sql<number>`count(*)::int` })
    .from(ledgerEntries)
    .innerJoin(orders, eq(orders.id, ledgerEntries.orderId))
    .where(like(orders.merchantOrderNo, `${tag}-%`))
    .groupBy(ledgerEntries.orderId);

describe('a replay of 1,000 failed jobs', () => {
  it('at 100 per second takes about 10 s and credits each order once', async () => {
    const { tag, from } = await failedPayins(1000, '10.00');
    const d = driver();
    const started = performance.now();
    const replay = await startReplay(tag, from, 100);
    expect(replay.total).toBe(1000);
    d.wake();
    const done = await waitFor(
      async () => {
        const r = await replayRow(replay.id);
        return r.status === 'finished' ? r : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50, message: 'the replay did not finish' },
    );
    const seconds = (performance.now() - started) / 1000;
    expect(done).toMatchObject({ replayed: 1000, skipped: 0 });
    // Paced at 100 per second: 1,000 jobs cannot go in less than ~9.9 s, and should not take much longer.
    expect(seconds).toBeGreaterThanOrEqual(9.5);
    expect(seconds).toBeLessThan(13);

    const credits = await waitFor(
      async () => {
        const c = await creditsOf(tag);
        return c.length === 1000 ? c : undefined;
      },
      { timeoutMs: 60_000, message: 'not every order was credited' },
    );
    expect(credits.every((c) => c.n === 1)).toBe(true);
    const [audit] = await env.db.db.select().from(operatorActions).where(eq(operatorActions.action, 'replays.start'));
    expect(audit).toMatchObject({
      operator: 'otto.operator@example.com',
      role: 'operator',
      outcome: 'started',
      reason: `replay ${tag}: Get order was down`,
    });
  }, 180_000);

  it('cancelled mid-way, sends no further job back within one second; a restarted console resumes a running one', async () => {
    const { tag, from } = await failedPayins(1000, '20.00');
    const first = driver();
    const replay = await startReplay(tag, from, 100);
    first.wake();
    await waitFor(async () => (await replayRow(replay.id)).replayed >= 100, { timeoutMs: 30_000, intervalMs: 20 });

    // A console restart: the first driver closes (its lease is released), a second one picks the replay up.
    await first.close();
    const atRestart = (await replayRow(replay.id)).replayed;
    expect(atRestart).toBeLessThan(1000);
    const second = driver();
    await waitFor(async () => (await replayRow(replay.id)).replayed >= atRestart + 100, {
      timeoutMs: 30_000,
      intervalMs: 20,
      message: 'the second console did not resume the replay',
    });
    expect(second.driving.has(replay.id)).toBe(true);

    const asked = performance.now();
    const res = await stack.app.inject({
      method: 'POST',
      url: `/api/replays/${replay.id}/cancel`,
      headers: bearer('operator'),
      payload: { reason: 'wrong window' },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ replay: { status: 'cancelled' } });
    await waitFor(() => !second.driving.has(replay.id), {
      timeoutMs: 1000,
      intervalMs: 10,
      message: 'the driver did not stop within one second',
    });
    expect(performance.now() - asked).toBeLessThan(1000);

    // What it sent back is what left the failed set; the rest stays failed for another day; nothing twice.
    const final = await replayRow(replay.id);
    expect(final.status).toBe('cancelled');
    expect(final.replayed).toBeLessThan(1000);
    const credits = await waitFor(
      async () => {
        const c = await creditsOf(tag);
        return c.length === final.replayed ? c : undefined;
      },
      { timeoutMs: 30_000, message: `expected ${final.replayed} credits` },
    );
    expect(credits.every((c) => c.n === 1)).toBe(true);
    const stillFailed = await waitFor(
      async () => {
        const n = (await stack.queue.getJobs(['failed'], 0, -1)).filter((j) =>
          String(j.data.merchantOrderNo).startsWith(`${tag}-`),
        ).length;
        return n === 1000 - final.replayed ? n : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(stillFailed + final.replayed).toBe(1000);
    expect(
      (
        await stack.app.inject({
          method: 'POST',
          url: `/api/replays/${replay.id}/cancel`,
          headers: bearer('operator'),
          payload: { reason: 'again' },
        })
      ).statusCode,
    ).toBe(409);
  }, 180_000);

  it('a replay held by a console that died is resumed by another once its lease lapses, not before', async () => {
    const { tag, from } = await failedPayins(20, '30.00');
    const replay = await startReplay(tag, from, 100);
    // The console that started it died holding the lease (no driver released it).
    await env.db.db
      .update(replays)
      .set({ leaseOwner: 'dead-console', leaseUntil: sql`now() + interval '2 seconds'` })
      .where(eq(replays.id, replay.id));
    const { leaseUntil } = await replayRow(replay.id);
    const survivor = driver();
    survivor.wake();
    await waitFor(async () => (await replayRow(replay.id)).replayed > 0, {
      timeoutMs: 15_000,
      intervalMs: 20,
      message: 'nobody resumed the replay',
    });
    expect(Date.now()).toBeGreaterThanOrEqual(leaseUntil!.getTime());
    const done = await waitFor(
      async () => {
        const r = await replayRow(replay.id);
        return r.status === 'finished' ? r : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(done).toMatchObject({ replayed: 20, skipped: 0 });
    const credits = await waitFor(
      async () => {
        const c = await creditsOf(tag);
        return c.length === 20 ? c : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(credits.every((c) => c.n === 1)).toBe(true);
  }, 60_000);
});
