import { catalogSnapshots } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient, type PlatformOrder } from '@mcb/core/platform';
import { callbackJobId, merchantKeys } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import { freePort, useTestEnv, waitFor } from '@mcb/testkit';
import type { Job } from 'bullmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSweep, type SweepDeps, type SweepReport } from '@mcb/settlement';
import { createMaintenanceWorker } from '../../apps/worker/src/index.ts';
import { MERCHANT_NO, startPipeline, type Pipeline } from './helpers/pipeline.ts';

// 3, 9, 27, 81 platform minutes → 9, 27, 81, 243 ms: the whole retry schedule in well under a second.
const TIME_SCALE = 20_000;

const env = useTestEnv();
let p: Pipeline;
let platform: PlatformClient;
let redis: Redis;
let closedPort: number;
const logger = createLogger({ name: 'e2e-reconcile', level: 'silent' });

/** The sweep as the worker runs it, on the pipeline's database; MIN_AGE 0 so orders registered just now count. */
function sweepDeps(): SweepDeps {
  return {
    db: env.db.db,
    platform,
    logger,
    redis,
    lockKey: merchantKeys(env.prefix).sweepLock,
    merchantNo: MERCHANT_NO,
    settings: { minAgeMs: 0, maxAgeMs: 7 * 24 * 3600_000, ratePerSecond: 500, batchSize: 50 },
  };
}
const sweep = (): Promise<SweepReport> => runSweep(sweepDeps());

/** The callbacks job of a pair, once the worker has finished it. */
function settledJob(orderNo: string, state: number) {
  return waitFor(
    async () => {
      const job = await p.queue.getJob(callbackJobId('payin', orderNo, state));
      return job?.finishedOn ? job : undefined;
    },
    { timeoutMs: 10_000, message: `job for ${orderNo}/${state}` },
  );
}

/** What a finished callbacks job came to: its return value's status, or why it failed. */
function outcomeOf(job: Job): string {
  return (job.returnvalue as { status?: string } | null)?.status ?? `failed: ${job.failedReason}`;
}

/**
 * Make a sweep and a callback commit for our order `merchantOrderNo` at the same moment. Our order's row is held
 * (`FOR NO KEY UPDATE`, as a concurrent transaction would); the sweep runs, and `afterSweepRead` is called once the
 * sweep has Get order's answer for this order (to release the callback). Both commits reach the guarded UPDATE and
 * wait on the row; only when both wait is it let go, so they race in Postgres with a snapshot that says pending.
 */
async function raceAtTheOrderRow(
  merchantOrderNo: string,
  platformOrderNo: string,
  afterSweepRead: (answer: PlatformOrder) => void,
): Promise<{ report: SweepReport; job: Job }> {
  const holder = new pg.Client({ connectionString: env.databaseUrl });
  await holder.connect();
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await holder.query('ROLLBACK');
  };
  try {
    await holder.query('BEGIN');
    const { rowCount } = await holder.query('SELECT 1 FROM orders WHERE merchant_order_no = $1 FOR NO KEY UPDATE', [
      merchantOrderNo,
    ]);
    expect(rowCount).toBe(1);
    let read = false;
    const watched: PlatformClient = {
      ...platform,
      getOrder: async (no, opts) => {
        const answer = await platform.getOrder(no, opts);
        if (no === merchantOrderNo && !read) {
          read = true;
          afterSweepRead(answer);
        }
        return answer;
      },
    };
    const sweeping = runSweep({ ...sweepDeps(), platform: watched });
    // Both commits wait on the row (the second may wait on the first's receipt): two backends blocked on a lock.
    // Asked outside the holder's transaction, which would see one cached snapshot of pg_stat_activity.
    await waitFor(
      async () => {
        const { rows } = await env.db.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0]!.n >= 2;
      },
      {
        timeoutMs: 10_000,
        message: `the sweep's and the callback's commits for ${merchantOrderNo} both waiting on the order`,
      },
    );
    await release();
    const report = await sweeping;
    const job = await settledJob(platformOrderNo, 6);
    return { report, job };
  } finally {
    await release().catch(() => {});
    await holder.end();
  }
}

beforeAll(async () => {
  closedPort = await freePort();
  p = await startPipeline(env, { timeScale: TIME_SCALE });
  platform = createPlatformClient({ baseUrl: p.sandboxUrl, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
  redis = createRedis(env.redisUrl, 'worker');
});
afterAll(async () => {
  await p?.close();
  await platform?.close();
  await redis?.quit();
});

describe('reconciliation recovers what the callbacks never delivered, exactly once', () => {
  it('credits once a pay-in whose callbacks all failed (ingest unreachable for the whole retry schedule)', async () => {
    // 1. Registered, paid and released; every attempt goes to a port nobody listens on.
    await p.registerPayin('E2E-RC-LOST', '1000.10');
    p.sim.createPayin({
      merchantOrderNo: 'E2E-RC-LOST',
      currency: 'INR',
      amount: '1000.10',
      callbackUrl: `http://127.0.0.1:${closedPort}/callbacks/payin`,
    });
    const delivery = await p.sim.settled(p.sim.finalize('E2E-RC-LOST', 6).deliveries[0]!);
    expect(delivery.status).toBe('gave-up');
    expect(delivery.attempts).toHaveLength(5);
    expect((await p.orderState('E2E-RC-LOST')).status).toBe('pending');

    // 2. The sweep finds it.
    const report = await sweep();
    expect(report.recovered.credited).toBe(1);
    expect(report.errors).toBe(0);
    const s = await p.orderState('E2E-RC-LOST');
    expect(s.status).toBe('credited');
    expect(s.ledger).toEqual([{ entryType: 'payin_credit', amount: '1000.1' }]);
    expect(s.receipts).toEqual([{ orderNo: delivery.orderNo, state: 6 }]);
    expect(s.reviews).toEqual([]);

    // 3. Sweeping again changes nothing.
    await sweep();
    expect((await p.orderState('E2E-RC-LOST')).ledger).toHaveLength(1);
  });

  it('credits once when the sweep recovers an order and its callback arrives after all (same pair, state 6)', async () => {
    await p.registerPayin('E2E-RC-LATE6', '250.00');
    p.sim.createPayin({ merchantOrderNo: 'E2E-RC-LATE6', currency: 'INR', amount: '250.00' });
    // 1. The platform holds the callback back (sent later, on release).
    p.sim.setFaults({ outOfOrder: true });
    try {
      const { order, deliveries } = p.sim.finalize('E2E-RC-LATE6', 6);
      expect(deliveries[0]!.status).toBe('held');
      // 2. The sweep credits it.
      expect((await sweep()).recovered.credited).toBeGreaterThanOrEqual(1);
      expect((await p.orderState('E2E-RC-LATE6')).ledger).toHaveLength(1);
      // 3. The callback arrives at ingest; the worker sees the receipt of the same pair.
      p.sim.setFaults({ outOfOrder: false });
      expect((await p.sim.settled(deliveries[0]!)).status).toBe('delivered');
      const job = await settledJob(order.orderNo, 6);
      expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });
    } finally {
      p.sim.setFaults({ outOfOrder: false });
    }
    const s = await p.orderState('E2E-RC-LATE6');
    expect(s.status).toBe('credited');
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toHaveLength(1);
  });

  it('credits once when the sweep recovers a pay-in at state 3 and the state-6 callback arrives later', async () => {
    await p.registerPayin('E2E-RC-3THEN6', '77.70');
    const order = p.sim.createPayin({ merchantOrderNo: 'E2E-RC-3THEN6', currency: 'INR', amount: '77.70' });
    // 1. Success (3): the platform sends no callback; only Get order knows.
    expect(p.sim.finalize(order.orderNo, 3).deliveries).toEqual([]);
    expect((await sweep()).recovered.credited).toBeGreaterThanOrEqual(1);
    expect((await p.orderState('E2E-RC-3THEN6')).receipts).toEqual([{ orderNo: order.orderNo, state: 3 }]);
    // 2. Released (6): the callback reaches ingest and the worker; a different pair, but the order is credited.
    const delivery = await p.sim.settled(p.sim.finalize(order.orderNo, 6).deliveries[0]!);
    expect(delivery.status).toBe('delivered');
    const job = await settledJob(order.orderNo, 6);
    expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'already-final' });
    // 3. A later sweep has nothing to do for it either.
    await sweep();
    const s = await p.orderState('E2E-RC-3THEN6');
    expect(s.status).toBe('credited');
    expect(s.ledger).toEqual([{ entryType: 'payin_credit', amount: '77.7' }]);
    expect(s.receipts).toHaveLength(1);
    expect(s.reviews).toEqual([]);
  });

  it('credits once when a sweep that read state 3 and the state-6 callback commit at the same moment', async () => {
    for (let i = 0; i < 3; i++) {
      const no = `E2E-RC-RACE36-${i}`;
      await p.registerPayin(no, '10.00');
      const order = p.sim.createPayin({ merchantOrderNo: no, currency: 'INR', amount: '10.00' });
      // 1. Success (3): only Get order knows. The sweep reads it; right after its read the order is released (6)
      //    and the platform sends the callback, which the worker confirms as 6: two pairs, one order.
      p.sim.finalize(order.orderNo, 3);
      let delivery: Promise<{ status: string }> | undefined;
      const { report, job } = await raceAtTheOrderRow(no, order.orderNo, (answer) => {
        expect(answer.state).toBe(3);
        delivery = p.sim.settled(p.sim.finalize(order.orderNo, 6).deliveries[0]!);
      });
      expect((await delivery!).status).toBe('delivered');
      // 2. Exactly one of the two moved the order; the other saw it credited and did nothing.
      expect(report.errors).toBe(0);
      const applied = [report.recovered.credited === 1, outcomeOf(job) === 'applied'];
      expect(applied.filter(Boolean)).toHaveLength(1);
      if (applied[0]) expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'already-final' });
      else expect(report.duplicates).toBe(1);
      const s = await p.orderState(no);
      expect(s.status).toBe('credited');
      expect(s.ledger).toEqual([{ entryType: 'payin_credit', amount: '10' }]);
      expect(s.receipts).toHaveLength(1);
      expect(s.reviews).toEqual([]);
    }
  });

  it('credits once when a sweep and the callback commit the same pair (6 against 6) at the same moment', async () => {
    for (let i = 0; i < 3; i++) {
      const no = `E2E-RC-RACE66-${i}`;
      await p.registerPayin(no, '10.00');
      const order = p.sim.createPayin({ merchantOrderNo: no, currency: 'INR', amount: '10.00' });
      // The platform holds the callback until the sweep has read 6, then delivers it.
      p.sim.setFaults({ outOfOrder: true });
      let delivery: Promise<{ status: string }> | undefined;
      try {
        const held = p.sim.finalize(order.orderNo, 6).deliveries[0]!;
        expect(held.status).toBe('held');
        const { report, job } = await raceAtTheOrderRow(no, order.orderNo, (answer) => {
          expect(answer.state).toBe(6);
          p.sim.setFaults({ outOfOrder: false });
          delivery = p.sim.settled(held);
        });
        expect((await delivery!).status).toBe('delivered');
        expect(report.errors).toBe(0);
        const applied = [report.recovered.credited === 1, outcomeOf(job) === 'applied'];
        expect(applied.filter(Boolean)).toHaveLength(1);
        if (applied[0]) expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });
        else expect(report.duplicates).toBe(1);
      } finally {
        p.sim.setFaults({ outOfOrder: false });
      }
      const s = await p.orderState(no);
      expect(s.status).toBe('credited');
      expect(s.ledger).toHaveLength(1);
      expect(s.receipts).toEqual([{ orderNo: order.orderNo, state: 6 }]);
    }
  });

  it('leaves an order the platform never finalises pending: no credit, no review', async () => {
    await p.registerPayin('E2E-RC-NEVER', '5.00');
    p.sim.createPayin({ merchantOrderNo: 'E2E-RC-NEVER', currency: 'INR', amount: '5.00' });
    await p.registerPayout('E2E-RC-NEVER-PO', '300.00');
    p.sim.createPayout({ merchantOrderNo: 'E2E-RC-NEVER-PO', currency: 'INR', amount: '300.00' });

    const first = await sweep();
    const second = await sweep();
    for (const report of [first, second]) {
      expect(report.stillPending).toBeGreaterThanOrEqual(2);
      expect(report.reviews).toBe(0);
      expect(report.errors).toBe(0);
    }
    for (const no of ['E2E-RC-NEVER', 'E2E-RC-NEVER-PO']) {
      const s = await p.orderState(no);
      expect(s.status).toBe('pending');
      expect(s.ledger).toEqual([]);
      expect(s.receipts).toEqual([]);
      expect(s.reviews).toEqual([]);
    }
  });

  it('stops when the platform is down, then the next sweep recovers the order', async () => {
    await p.registerPayin('E2E-RC-DOWN', '42.00');
    p.sim.createPayin({
      merchantOrderNo: 'E2E-RC-DOWN',
      currency: 'INR',
      amount: '42.00',
      callbackUrl: `http://127.0.0.1:${closedPort}/callbacks/payin`,
    });
    await p.sim.settled(p.sim.finalize('E2E-RC-DOWN', 6).deliveries[0]!);
    p.sim.setFaults({ apiDown: 'error' });
    try {
      const report = await sweep();
      expect(report.stoppedEarly).toBe(true);
      expect(report.stopReason).toMatch(/PLATFORM_HTTP_ERROR/);
      expect(report.reviews).toBe(0);
    } finally {
      p.sim.setFaults({ apiDown: 'off' });
    }
    expect((await p.orderState('E2E-RC-DOWN')).status).toBe('pending');
    expect((await sweep()).recovered.credited).toBe(1);
    expect((await p.orderState('E2E-RC-DOWN')).ledger).toHaveLength(1);
  });

  it("recovers on the worker's own schedule (maintenance queue), and refreshes the catalog there too", async () => {
    await p.registerPayout('E2E-RC-SCHED', '120.00');
    p.sim.createPayout({
      merchantOrderNo: 'E2E-RC-SCHED',
      currency: 'INR',
      amount: '120.00',
      callbackUrl: `http://127.0.0.1:${closedPort}/callbacks/payout`,
    });
    expect((await p.sim.settled(p.sim.finalize('E2E-RC-SCHED', 5).deliveries[0]!)).status).toBe('gave-up');

    const connection = createRedis(env.redisUrl, 'worker');
    const maintenance = await createMaintenanceWorker({
      ...sweepDeps(),
      redis: connection,
      connection,
      prefix: env.prefix,
      reconcileEveryMs: 200,
      catalogRefreshEveryMs: 200,
    });
    try {
      await waitFor(async () => (await p.orderState('E2E-RC-SCHED')).status === 'refused', {
        timeoutMs: 10_000,
        message: 'refused by a scheduled sweep',
      });
      await waitFor(async () => (await env.db.db.select().from(catalogSnapshots)).length > 0, {
        message: 'a stored catalog',
      });
    } finally {
      await maintenance.close();
      await connection.quit();
    }
    expect((await p.orderState('E2E-RC-SCHED')).ledger).toEqual([{ entryType: 'payout_refund', amount: '120' }]);
  });
});
