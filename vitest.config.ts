import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * How `pnpm test` spends a 2-core machine. Most test files wait on Postgres, Redis and the processes they start far
 * more than they compute, so they run two at a time; the files that measure time against the wall clock run alone,
 * after the rest. Three projects (docs/CONTRIBUTING.md, "Where a new test file goes"):
 *
 * - `shared`: every file not listed below. Two at a time (after `paired`), in worker processes reused from file to
 *   file (`isolate: false`): the modules a file imports stay loaded for the next file in that worker, so a file leaves
 *   nothing behind (it restores what it changes in `process.env`, fake timers and spies, and closes what it opens).
 * - `paired`: {@link PAIRED}, two at a time, each in a worker process of its own. Measured: vitest runs it before
 *   `shared`, not beside it (the projects share the pool's two workers); see docs/CONTRIBUTING.md.
 * - `solo`: {@link SOLO}, one file at a time, once `shared` and `paired` are done.
 *
 * A new file lands in `shared`. It goes into SOLO, with its reason, when it asserts a bound on wall-clock time that a
 * second test on the machine could break: a latency or its percentile, a rate or the spacing of requests, fairness
 * between merchants, an exit or a cut-off within a deadline. A bound that only says "at least" (the code waited)
 * holds however busy the machine is and needs no list. It goes into PAIRED when it drives a load or a chaos run of
 * its own processes.
 */

const TESTS = ['apps/*/test/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'test/**/*.test.ts'];

/** One at a time: each asserts a wall-clock bound that a neighbour's CPU could break. */
const SOLO = [
  // Latency, or its percentiles, while the test loads the machine itself.
  'test/reliability/slow-http-attacks-from-one-address-do-not-delay-genuine-callbacks.test.ts', // genuine p99 < 1 s
  'test/reliability/overload-fails-fast-and-loses-nothing.test.ts', // p99 of the refusals within the reply timeout
  'test/reliability/failure-replies-are-indistinguishable.test.ts', // mean reply times of the refusal kinds compared
  'apps/ingest/test/ingest-rides-out-redis-outage.test.ts', // a fail within 2 s of Redis dying
  'apps/worker/test/alerts-webhook-once-per-exhausted-job-and-new-review.test.ts', // a hung hook costs < 2 s
  'test/console/lists-catch-up-with-the-queue-after-a-database-outage.test.ts', // listed within 10 s
  'apps/ingest/test/ingest-cuts-off-slow-clients-within-its-bounds.test.ts', // cut off within timeout + 2.5 s
  'apps/ingest/test/ingest-admits-connections-by-source-before-reading-a-byte.test.ts', // likewise
  // Rates and the spacing of requests, measured where they arrive.
  'test/reliability/three-workers-share-one-get-order-budget-and-breaker.test.ts', // >= 60 % of the budget used
  'packages/core/test/fleet-budget-and-breaker-are-shared-through-redis.test.ts', // busiest second, total time
  'packages/core/test/fleet-budget-holds-through-a-sentinel-failover.test.ts', // likewise, across a failover
  'packages/core/test/fleet-budget-survives-a-clock-step-and-caps-each-wait.test.ts', // likewise, and each wait
  'packages/core/test/platform-guard-caps-the-rate-and-waits-out-an-outage.test.ts', // busiest second <= the cap
  'apps/worker/test/reconcile-sweep-finds-and-recovers-pending-orders.test.ts', // >= 40 ms between two look-ups
  'apps/sandbox/test/callback-retry-schedule-follows-the-spec.test.ts', // each retry within 400 ms of its time
  'apps/worker/test/worker-in-flight-follows-get-order-and-stays-under-the-rate-cap.test.ts', // limit vs latency
  'test/console/replay-of-1000-failed-jobs-at-100-per-second.test.ts', // 1000 jobs in 9.5 to 13 s
  'apps/worker/test/worker-processes-keep-merchants-apart-through-a-flood-an-outage-and-a-sigkill.test.ts', // fairness
  // A merchant's pause holds its credits within 2 s of the reply (a lane polls every 0.5 s).
  'test/merchants/paused-merchant-is-acknowledged-held-and-credited-once-after-resume.test.ts',
  'test/console/admin-pauses-a-merchant-from-its-page-browser.test.ts',
  // Processes that must exit within their shutdown bound.
  'test/reliability/processes-stop-within-their-bound-and-write-only-json-while-redis-is-down.test.ts',
  'test/reliability/worker-stopped-with-jobs-in-flight-and-redis-gone-credits-each-once.test.ts',
  // The whole demo: its own services and four apps busy both cores. Beside another file it took 66 s instead of 37
  // and the run was no shorter (the suite is CPU-bound), so it runs alone. Its port checks would hold beside another:
  // a port still listening counts only when a process of the run holds it (test/helpers/process-scan.ts).
  'test/e2e/demo-once-exits-zero-and-matches-database.test.ts',
  'test/e2e/demo-with-own-services-leaves-no-process-or-port.test.ts',
];

/**
 * Two at a time beside `shared`, each in a worker process of its own: load and chaos runs of their own processes
 * and servers (thousands of callbacks, failovers, restarts). A fresh worker per file means that when one overruns its
 * timeout, what it still has running (a load generator, timers, servers killed only at exit) ends with its worker
 * instead of running on under the next file, and none of their heaps stays in a shared worker.
 */
const PAIRED = [
  'test/reliability/chaos-bounded.test.ts',
  'test/reliability/chaos-sentinel-stale-primary-and-partitions-lose-no-acknowledged-callback.test.ts',
  'test/reliability/sentinel-failover-under-load-loses-no-acknowledged-callback.test.ts',
  'test/reliability/postgres-switchover-under-load-credits-once.test.ts',
  'test/reliability/read-only-database-under-load-credits-every-callback.test.ts',
  'test/reliability/four-workers-through-one-pgbouncer-credit-5000-events-once.test.ts',
  'test/reliability/redis-at-maxmemory-refuses-early-and-recovers.test.ts',
];

// A renamed or deleted file would leave its old name here matching nothing, and its new name in `shared`.
const stale = [...SOLO, ...PAIRED].filter((file) => !existsSync(resolve(import.meta.dirname, file)));
if (stale.length > 0) throw new Error(`vitest.config.ts lists test files that do not exist: ${stale.join(', ')}`);

export default defineConfig({
  test: {
    globals: false,
    globalSetup: ['packages/testkit/src/global-setup.ts'],
    // The apps' module hooks, before a file's imports load drizzle-orm; fast-check properties draw the same cases
    // on every run (FC_SEED overrides). See each file.
    setupFiles: ['test/helpers/register-module-hooks.ts', 'test/helpers/pin-fast-check-seed.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    // One report for the three projects: .ci/run reads its numPassedTests and numFailedTests.
    reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: TESTS,
          exclude: [...configDefaults.exclude, ...SOLO, ...PAIRED],
          isolate: false,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'paired',
          include: PAIRED,
          isolate: true,
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'solo',
          include: SOLO,
          isolate: true,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
