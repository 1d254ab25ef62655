import { sql } from 'drizzle-orm';
import { describe, expect } from 'vitest';
import { orders } from '@mcb/core/db';
import { waitFor, type TestEnv } from '@mcb/testkit';
import { createAdaptiveLimit, type AdaptiveLimit } from '../src/adaptive-concurrency.ts';
import { payinJobs, releasedPayins, workerTest } from '@mcb/testkit/worker';

// A real worker, queue and database, and a platform double whose pace the test sets: jobs in flight grow while
// Get order is fast, are cut when it slows and when it fails, and Get order never exceeds PLATFORM_MAX_RPS.

const MAX_RPS = 400;
const N = 2500;
const it = workerTest
  .extend('nos', { scope: 'file' }, ({ env, platform }) => {
    platform.setDelay(20);
    return releasedPayins(env, platform, 'AL', N);
  })
  .extend('adaptive', { scope: 'file' }, ({ nos: _nos }): AdaptiveLimit =>
    createAdaptiveLimit({ initial: 16, max: 400, maxRps: MAX_RPS }),
  )
  .extend('harnessOptions', { scope: 'file' }, ({ adaptive }) => ({
    adaptive,
    platformGuard: {
      maxRps: MAX_RPS,
      failuresToOpen: 20,
      openMs: { initial: 300, max: 600 },
      onSample: adaptive.sample,
      onStateChange: (s: string) => adaptive.paused(s === 'open'),
    },
  }));

const credited = async (env: TestEnv) =>
  Number(
    (
      await env.db.db
        .select({ n: sql<string>`count(*)` })
        .from(orders)
        .where(sql`${orders.status} = 'credited'`)
    )[0]!.n,
  );

describe('the worker adapts its jobs in flight to Get order', () => {
  it('grows while Get order is fast, cuts when it slows and when it fails, never exceeds PLATFORM_MAX_RPS, and credits each once', async ({
    env,
    platform,
    h,
    adaptive,
    nos,
  }) => {
    const worker = h.workers[0]!;
    // The process's jobs in flight: the shares of its fetch loops (BullMQ Workers) that fetch add up to the limit (a
    // parked loop fetches nothing: fetch-loops.ts).
    const allowed = () => worker.fetchLoops.slice(0, worker.fetching()).reduce((n, l) => n + l.concurrency, 0);
    await h.queue.addBulk(payinJobs(nos, { attempts: 60, backoff: { type: 'callback-backoff' } }));

    // 1. Fast Get order (20 ms): the limit grows from 16, within what 400 requests/s can serve (400 × 45 ms × 2 = 36).
    await waitFor(() => adaptive.limit >= 32, {
      timeoutMs: 20_000,
      message: `limit did not grow (at ${adaptive.limit})`,
    });
    const fastPeak = adaptive.limit;
    expect(allowed()).toBe(fastPeak);

    // 2. Get order slows to 600 ms, thirty times its pace: the limit is cut, and jobs in flight follow it down.
    platform.setDelay(600);
    await waitFor(() => adaptive.limit <= fastPeak / 2, {
      timeoutMs: 15_000,
      message: `limit not cut on a slowdown (at ${adaptive.limit})`,
    });
    expect(allowed()).toBeLessThanOrEqual(fastPeak / 2);

    // 3. The platform fails every Get order (HTTP 503) for a while: the limit falls to its minimum, and the circuit
    //    opens, so the jobs wait for it instead of burning their attempts.
    platform.setDelay(20);
    expect(await credited(env)).toBeLessThan(N - 100); // still work to do: the outage hits jobs in flight
    platform.setOutage(503);
    await waitFor(() => adaptive.limit <= 8, {
      timeoutMs: 15_000,
      message: `limit not cut by failures (at ${adaptive.limit})`,
    });
    platform.setOutage(undefined);

    // 4. The platform recovers: every order is credited exactly once, and the rate cap held throughout.
    await waitFor(async () => (await credited(env)) === N, {
      timeoutMs: 90_000,
      intervalMs: 500,
      message: 'not every order credited',
    });
    const ledger = await env.db.db.execute(
      sql`select count(*)::int as n, count(distinct order_id)::int as orders from ledger_entries`,
    );
    expect(ledger.rows[0]).toEqual({ n: N, orders: N });
    const sorted = [...platform.arrivals].sort((a, b) => a - b);
    let busiest = 0;
    for (let i = 0, j = 0; j < sorted.length; j++) {
      while (sorted[j]! - sorted[i]! >= 1000) i++;
      busiest = Math.max(busiest, j - i + 1);
    }
    expect(busiest).toBeLessThanOrEqual(MAX_RPS);
  }, 150_000);
});
