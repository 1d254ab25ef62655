import { Worker } from 'bullmq';
import { sql } from 'drizzle-orm';
import { describe, expect } from 'vitest';
import { waitFor } from '@mcb/testkit';
import { createAdaptiveLimit, type AdaptiveLimit } from '../src/adaptive-concurrency.ts';
import { shareOf } from '../src/fetch-loops.ts';
import { payinJobs, releasedPayins, workerTest } from '@mcb/testkit/worker';

// One worker process, several BullMQ Workers on the callbacks queue (fetch-loops.ts): together they run the
// process's jobs in flight, their events reach the worker's listeners, and pause/close act on all of them.

const N = 240;
const it = workerTest
  .extend('adaptive', { scope: 'file' }, ({ platform }): AdaptiveLimit => {
    platform.setDelay(50);
    return createAdaptiveLimit({ initial: 42, max: 400 });
  })
  // Every loop fetches from a limit of 8, so that a limit of 42 keeps all four fetching (by default, below 256, three
  // are parked: fetch-loops-park-the-loops-a-low-limit-does-not-need.test.ts).
  .extend('harnessOptions', { scope: 'file' }, ({ adaptive }) => ({ adaptive, allLoopsFrom: 8 }))
  .extend('nos', { scope: 'file' }, ({ env, platform }) => releasedPayins(env, platform, 'FL', N));

describe('a worker process with several fetch loops', () => {
  it('splits the jobs in flight between them, shares differing by at most one', ({ h }) => {
    expect([0, 1, 2, 3].map((i) => shareOf(42, 4, i))).toEqual([11, 11, 10, 10]);
    expect([0, 1, 2, 3].map((i) => shareOf(8, 4, i))).toEqual([2, 2, 2, 2]);
    // A loop always has a slot: BullMQ refuses a concurrency below 1.
    expect([0, 1, 2, 3].map((i) => shareOf(2, 4, i))).toEqual([1, 1, 1, 1]);
    const worker = h.workers[0]!;
    expect(worker.fetchLoops).toHaveLength(4); // the default with an adaptive limit
    // The worker owns its loops (issue 39): each is a BullMQ Worker, none of them the composite itself.
    expect(worker.fetchLoops.every((l) => l instanceof Worker)).toBe(true);
    expect(worker.fetchLoops.map((l) => l.concurrency).reduce((a, b) => a + b)).toBe(42);
  });

  it('credits every order once, each loop taking a share, and every completion reaches the worker', async ({
    env,
    h,
    adaptive,
    nos,
  }) => {
    const worker = h.workers[0]!;
    // The composite's listeners hear every loop; a loop's own listeners hear that loop only.
    const others = worker.fetchLoops.slice(1).map(() => 0);
    worker.fetchLoops.slice(1).forEach((l, i) => l.on('completed', () => others[i]!++));
    let seen = 0;
    worker.on('completed', () => seen++);
    await h.queue.addBulk(payinJobs(nos, { attempts: 5 }));
    await waitFor(() => seen === N, { timeoutMs: 60_000, message: 'not every completion reached the worker' });
    const ledger = await env.db.db.execute(
      sql`select count(*)::int as n, count(distinct order_id)::int as orders from ledger_entries`,
    );
    expect(ledger.rows[0]).toEqual({ n: N, orders: N });
    const byOthers = others.reduce((a, b) => a + b);
    for (const n of [N - byOthers, ...others]) expect(n).toBeGreaterThan(0);
    // The limit moved while the orders ran, and the loops' shares followed it.
    await waitFor(() => worker.fetchLoops.map((l) => l.concurrency).reduce((a, b) => a + b) === adaptive.limit, {
      timeoutMs: 2000,
      message: 'the loops do not share the current limit',
    });
  }, 90_000);

  it("fetches again only once every holder let go: a merchant's pause outlives the Redis OOM back-off", async ({
    h,
  }) => {
    const worker = h.workers[0]!;
    await worker.pause(true, 'merchant-paused');
    await worker.pause(true, 'redis-oom');
    // The OOM back-off ends (redis-oom-pause.ts resumes its hold): the merchant is still paused.
    await worker.resume('redis-oom');
    expect([worker.held(), worker.held('merchant-paused'), worker.held('redis-oom')]).toEqual([true, true, false]);
    expect(worker.fetchLoops.map((l) => l.isPaused())).toEqual([true, true, true, true]);
    // A retune while held brings no parked loop back.
    worker.share(42, 4);
    expect(worker.fetchLoops.map((l) => l.isPaused())).toEqual([true, true, true, true]);
    await worker.resume('merchant-paused');
    expect(worker.held()).toBe(false);
    expect(worker.fetchLoops.map((l) => l.isPaused())).toEqual([false, false, false, false]);
  });

  it('pauses, resumes and closes every loop through the worker', async ({ h }) => {
    const worker = h.workers[0]!;
    await worker.pause(true);
    expect(worker.fetchLoops.map((l) => l.isPaused())).toEqual([true, true, true, true]);
    await worker.resume();
    expect(worker.fetchLoops.map((l) => l.isPaused())).toEqual([false, false, false, false]);
    await worker.close();
    expect(worker.fetchLoops.map((l) => l.isRunning())).toEqual([false, false, false, false]);
  });
});
