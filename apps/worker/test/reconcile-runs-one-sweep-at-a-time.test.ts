import { setTimeout as delay } from 'node:timers/promises';
import { orders } from '@mcb/core/db';
import { isAppError } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry } from '@mcb/core/metrics';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { MAINTENANCE_QUEUE, MaintenanceJobs, merchantKeys } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import {
  type FakePlatform,
  MERCHANT_NO,
  platformOrder,
  startFakePlatform,
  uid,
  useTestEnv,
  waitFor,
} from '@mcb/testkit';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReconcileMetrics, runSweep, type SweepDeps } from '@mcb/settlement';
import { createMaintenanceWorker, type MaintenanceWorker } from '../src/index.ts';

const env = useTestEnv();
let fake: FakePlatform;
let real: PlatformClient;
let redis: Redis;
const logger = createLogger({
  name: 'reconcile-lock-test',
  level: (process.env.TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent',
});

/** A platform whose Get order waits for `gate` (or a fixed delay) and records how many calls overlap. */
function slowPlatform(opts: { gate?: () => Promise<void>; delayMs?: number } = {}) {
  const seen = { inFlight: 0, maxInFlight: 0, calls: 0 };
  const client: PlatformClient = {
    async getOrder(no, callOpts) {
      seen.calls += 1;
      seen.inFlight += 1;
      seen.maxInFlight = Math.max(seen.maxInFlight, seen.inFlight);
      try {
        if (opts.gate) await Promise.race([opts.gate(), aborted(callOpts?.signal)]);
        if (opts.delayMs) await delay(opts.delayMs, undefined, { signal: callOpts?.signal });
        return await real.getOrder(no, callOpts);
      } finally {
        seen.inFlight -= 1;
      }
    },
    getPaymentMethods: (o) => real.getPaymentMethods(o),
    close: async () => {},
  };
  return { client, seen };
}

function aborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }));
}

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { wait: () => opened, open };
}

function deps(platform: PlatformClient, overrides: Partial<SweepDeps> = {}): SweepDeps {
  return {
    db: env.db.db,
    platform,
    logger,
    redis,
    lockKey: merchantKeys(env.prefix).sweepLock,
    merchantNo: MERCHANT_NO,
    settings: { minAgeMs: 0, maxAgeMs: 86_400_000, ratePerSecond: 1000, batchSize: 100, concurrency: 1 },
    ...overrides,
  };
}

beforeAll(async () => {
  fake = await startFakePlatform();
  real = createPlatformClient({ baseUrl: fake.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
  redis = createRedis(env.redisUrl, 'worker');
  // Three pending orders that Get order reports not final: every sweep looks them up and leaves them.
  for (let i = 0; i < 3; i++) {
    const no = `PO-${uid()}`;
    await env.db.db.insert(orders).values({
      merchantOrderNo: no,
      kind: 'payout',
      amount: '5',
      currency: 'PHP',
      requestHash: `t-${no}`,
      createdAt: sql`now() - interval '1 hour'`,
    });
    fake.setOrder(platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 1, amountJson: '5' }));
  }
});
afterAll(async () => {
  await real?.close();
  await fake?.close();
  await redis?.quit();
});

describe('one reconciliation sweep at a time', () => {
  it('refuses a second sweep with RECONCILE_IN_PROGRESS while one runs, and runs the next one after it', async () => {
    const g = gate();
    const { client } = slowPlatform({ gate: g.wait });
    // 1. A sweep starts and blocks on its first Get order.
    const first = runSweep(deps(client));
    await waitFor(async () => (await redis.exists(merchantKeys(env.prefix).sweepLock)) === 1, {
      message: 'the lock is taken',
    });
    // 2. A second one is refused at once, without touching the platform.
    const second = await runSweep(deps(real)).catch((e: unknown) => e);
    expect(isAppError(second, 'RECONCILE_IN_PROGRESS')).toBe(true);
    // 3. The first one finishes and releases the lock; a new sweep runs.
    g.open();
    await expect(first).resolves.toMatchObject({ scanned: 3, stillPending: 3 });
    expect(await redis.exists(merchantKeys(env.prefix).sweepLock)).toBe(0);
    await expect(runSweep(deps(real))).resolves.toMatchObject({ scanned: 3 });
  });

  it('renews the lock while a sweep outlasts its time to live', async () => {
    const g = gate();
    const { client } = slowPlatform({ gate: g.wait });
    const first = runSweep(deps(client, { lockTtlMs: 150 }));
    await waitFor(async () => (await redis.exists(merchantKeys(env.prefix).sweepLock)) === 1);
    await delay(450); // three TTLs: without renewal the lock would be gone
    await expect(runSweep(deps(real))).rejects.toMatchObject({ code: 'RECONCILE_IN_PROGRESS' });
    expect(await redis.pttl(merchantKeys(env.prefix).sweepLock)).toBeGreaterThan(0);
    g.open();
    await expect(first).resolves.toMatchObject({ stoppedEarly: false, scanned: 3 });
  });

  it('stops a sweep that lost its lock (expired and taken over), and leaves the new holder alone', async () => {
    const g = gate();
    const { client } = slowPlatform({ gate: g.wait });
    const first = runSweep(deps(client, { lockTtlMs: 150 }));
    await waitFor(async () => (await redis.exists(merchantKeys(env.prefix).sweepLock)) === 1);
    // Someone else holds it now (as after a long Redis stall that let it expire).
    await redis.set(merchantKeys(env.prefix).sweepLock, 'another-holder', 'PX', 5000);
    const report = await first;
    expect(report.stoppedEarly).toBe(true);
    expect(report.stopReason).toBe('aborted: reconciliation lock lost');
    expect(report.scanned).toBe(0);
    expect(await redis.get(merchantKeys(env.prefix).sweepLock)).toBe('another-holder');
    await redis.del(merchantKeys(env.prefix).sweepLock);
    g.open();
  });

  it('runs scheduled sweeps on the maintenance queue from two worker processes without overlap; a failing catalog refresh is not fatal', async () => {
    const { client, seen } = slowPlatform({ delayMs: 80 });
    const registry = createMetricsRegistry('reconcile-lock-test');
    const reconcileMetrics = createReconcileMetrics(registry);
    const connections = [createRedis(env.redisUrl, 'worker'), createRedis(env.redisUrl, 'worker')];
    const workers: MaintenanceWorker[] = [];
    try {
      for (const [i, connection] of connections.entries()) {
        workers.push(
          await createMaintenanceWorker({
            ...deps(client, { redis: connection, reconcileMetrics }),
            connection,
            prefix: env.prefix,
            name: `maintenance-${i}`,
            // A sweep takes about 3 × 80 ms, longer than its interval: the schedule would overlap without the lock.
            reconcileEveryMs: 100,
            // The fake platform has no getPaymentMethods: every refresh fails.
            catalogRefreshEveryMs: 150,
          }),
        );
      }
      const completed = async () =>
        (await reconcileMetrics.sweeps.get()).values.find(
          (v) => v.labels.trigger === 'schedule' && v.labels.result === 'completed',
        )?.value ?? 0;
      await waitFor(async () => (await completed()) >= 3, { timeoutMs: 15_000, message: 'three scheduled sweeps' });
      expect(seen.maxInFlight).toBe(1);
      const schedulers = await workers[0]!.queue.getJobSchedulers();
      expect(schedulers.map((s) => s.key).sort()).toEqual(
        [MaintenanceJobs.catalogRefresh, MaintenanceJobs.reconcile].sort(),
      );
      // The refresh failed (and stays scheduled); the sweeps kept running.
      await waitFor(
        async () => (await workers[0]!.queue.getFailed()).some((j) => j.name === MaintenanceJobs.catalogRefresh),
        {
          message: 'a failed catalog refresh',
        },
      );
      expect(workers.every((w) => w.worker.isRunning())).toBe(true);
      expect(MAINTENANCE_QUEUE).toBe(workers[0]!.queue.name);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
      await Promise.all(connections.map((c) => c.quit()));
    }
    // Closing aborted any sweep in progress and released its lock.
    expect(await redis.exists(merchantKeys(env.prefix).sweepLock)).toBe(0);
  });
});
