import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakePlatform, useTestEnv, waitFor, type FakePlatform } from '@mcb/testkit';
import { createAdaptiveLimit } from '../src/adaptive-concurrency.ts';
import { ALL_LOOPS_FROM, loopsFetching } from '../src/fetch-loops.ts';
import { type Harness, payinJobs, releasedPayins, startHarness } from '@mcb/testkit/worker';

// A worker process's fetch loops beyond the first fetch only from a limit of 256 jobs in flight on: at a fast Get
// order four loops fetching side by side cost CPU and commit smaller batches, for little to fill. The parked loops
// come back when the limit grows, and a pause of the whole worker keeps them parked.

const env = useTestEnv();
let platform: FakePlatform;
let h: Harness | undefined;

beforeAll(async () => {
  platform = await startFakePlatform();
  platform.setDelay(20);
});
afterAll(async () => {
  await h?.close();
  await platform?.close();
});

const paused = (h: Harness) => h.workers[0]!.fetchLoops.map((l) => l.isPaused());

describe('the fetch loops a low limit does not need', () => {
  it('every loop from a limit of 256 on (the limit it starts at), the first one below it', () => {
    expect(ALL_LOOPS_FROM).toBe(256);
    expect([0, 8, 255, 256, 600, 5000].map((limit) => loopsFetching(limit, 4))).toEqual([1, 1, 1, 4, 4, 4]);
    expect(loopsFetching(42, 4, 8)).toBe(4);
    expect(loopsFetching(600, 1)).toBe(1);
  });

  it('parks three of four loops below 256, credits every order through the first, keeps them parked through a pause', async () => {
    const nos = await releasedPayins(env, platform, 'PK', 60);
    const adaptive = createAdaptiveLimit({ initial: 42, max: 200 });
    // Counts the retune's windows (each one folds the limit first), to wait for two of them without a fixed sleep.
    let windows = 0;
    const update = adaptive.update.bind(adaptive);
    adaptive.update = () => (windows++, update());
    h = await startHarness(env, platform.url, { adaptive });
    const worker = h.workers[0]!;
    await waitFor(() => paused(h!).join() === 'false,true,true,true', {
      timeoutMs: 5000,
      message: 'the loops beyond the first were not parked',
    });
    expect(worker.fetching()).toBe(1);
    const byLoop = worker.fetchLoops.map(() => 0);
    worker.fetchLoops.forEach((l, i) => l.on('completed', () => byLoop[i]!++));
    await h.queue.addBulk(payinJobs(nos, { attempts: 5 }));
    await waitFor(() => byLoop.reduce((a, b) => a + b) === nos.length, {
      timeoutMs: 30_000,
      message: 'not every job completed',
    });
    // A loop parked while it waited for a job (BullMQ's blocking fetch) still takes the one job that wakes it, and then
    // fetches no more.
    expect(byLoop.slice(1).every((n) => n <= 1)).toBe(true);
    expect(byLoop[0]).toBeGreaterThanOrEqual(nos.length - 3);
    const ledger = await env.db.db.execute(
      sql`select count(*)::int as n, count(distinct order_id)::int as orders from ledger_entries`,
    );
    expect(ledger.rows[0]).toEqual({ n: nos.length, orders: nos.length });
    await waitFor(() => worker.fetchLoops[0]!.concurrency === adaptive.limit, {
      timeoutMs: 2000,
      message: 'the loop that fetches does not hold the whole limit',
    });

    // A pause stops every loop; a resume brings back only the loop that fetches, and the retune does not unpark the
    // others while the worker is paused.
    await worker.pause(true);
    expect(paused(h)).toEqual([true, true, true, true]);
    const after = windows;
    await waitFor(() => windows >= after + 2, { timeoutMs: 2000, message: 'the retune stopped' });
    expect(paused(h)).toEqual([true, true, true, true]);
    await worker.resume();
    expect(paused(h)).toEqual([false, true, true, true]);
    await h.close();
    h = undefined;
  }, 60_000);

  it('brings the parked loops back when the limit reaches 256', async () => {
    const adaptive = createAdaptiveLimit({ initial: 100, min: 100, max: 100 });
    h = await startHarness(env, platform.url, { adaptive });
    const worker = h.workers[0]!;
    await waitFor(() => paused(h!).join() === 'false,true,true,true', {
      timeoutMs: 5000,
      message: 'a limit of 100 did not park the loops beyond the first',
    });
    // The limit grows (as Get order slows): every loop fetches again, each with its share.
    adaptive.update = () => 600;
    await waitFor(() => paused(h!).join() === 'false,false,false,false', {
      timeoutMs: 5000,
      message: 'a limit of 600 did not bring the parked loops back',
    });
    expect(worker.fetching()).toBe(4);
    expect(worker.fetchLoops.map((l) => l.concurrency)).toEqual([150, 150, 150, 150]);
    await h.close();
    h = undefined;
  }, 30_000);
});
