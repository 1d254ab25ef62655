import { setTimeout as delay } from 'node:timers/promises';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';
import { ledgerFigures, startPayinLoad } from './helpers/payin-load.ts';

// What a demoted primary answers, under load: ingest and a worker (real processes) take N pay-ins at a steady rate
// while this file's own database turns read-only for a while (ALTER DATABASE ... SET default_transaction_read_only,
// and the worker's sessions terminated so that its pool reconnects to a read-only database), then writable again.
// Every write is answered 25006 meanwhile. The sessions opened during the read-only period stay read-only after it
// (a session keeps the default it started with), as pooled connections to a demoted primary keep reaching it: only
// a pool that lets them go credits anything afterwards. Before the fix 25006 was permanent, and most jobs failed for
// good (the issue saw 449 of 600). The shared server's own settings are never touched.
const N = 600;
const RATE = 40;
const READ_ONLY_AFTER_ACKS = 150;
/** How long the database stays read-only: about what a switchover's read-only window lasts. */
const READ_ONLY_MS = 8000;

describe('the database turns read-only under load, then writable again', () => {
  const env = useTestEnv();

  it(`credits every one of ${N} acknowledged callbacks once, within a minute of it becoming writable; no job fails for good`, async () => {
    const name = new URL(env.databaseUrl).pathname.slice(1);
    const load = await startPayinLoad({
      label: 'ro',
      count: N,
      db: env.db,
      workerDatabaseUrl: env.databaseUrl,
      redisUrl: env.redisUrl,
      prefix: env.prefix,
    });
    let passed = false;
    try {
      // 1. Send steadily; once READ_ONLY_AFTER_ACKS are acknowledged, the database turns read-only for READ_ONLY_MS.
      let writableAt = 0;
      let fault: Promise<void> | undefined;
      const readOnlyPeriod = async () => {
        await env.db.pool.query(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`);
        await env.db.pool.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'mcb-worker'`,
          [name],
        );
        await delay(READ_ONLY_MS); // the fault's duration, not a wait for something
        // The worker felt it: writes refused (25006), retried (DB_UNAVAILABLE) or, before the fix, failed for good.
        const felt = async () =>
          (await load.metric('mcb_worker_retries_total', 'code="DB_UNAVAILABLE"')) +
          (await load.metric('mcb_worker_jobs_total', 'outcome="failed"'));
        await waitFor(async () => (await felt()) > 0, {
          timeoutMs: 30_000,
          message: `the worker never met a refused write (log: ${load.logDir})`,
        });
        await env.db.pool.query(`ALTER DATABASE "${name}" RESET default_transaction_read_only`);
        writableAt = Date.now();
      };
      const acknowledged = await load.send(RATE, (acked) => {
        if (acked === READ_ONLY_AFTER_ACKS) fault = readOnlyPeriod();
      });
      await fault;
      expect(acknowledged).toBe(N);

      // 2. Every acknowledged callback credited within a minute of the database becoming writable.
      await waitFor(async () => (await ledgerFigures(env.db.pool)).credited === N, {
        timeoutMs: Math.max(0, writableAt + 60_000 - Date.now()),
        intervalMs: 250,
        message: `not every callback was credited within a minute of the database becoming writable (log: ${load.logDir})`,
      });
      const creditedAllAfterMs = Date.now() - writableAt;

      // 3. Once each, nothing failed for good, nothing sent to review, no process died.
      const figures = await ledgerFigures(env.db.pool);
      expect(figures).toEqual({ credited: N, doubleCredits: 0, reviews: 0, pending: 0 });
      expect((await load.jobCounts()).failed).toBe(0);
      expect(load.exits).toEqual([]);
      const retries = await load.metric('mcb_worker_retries_total', 'code="DB_UNAVAILABLE"');
      console.log(
        `read-only database under load: ${N} acknowledged, read-only for ${READ_ONLY_MS} ms after ${READ_ONLY_AFTER_ACKS}; ` +
          `${retries} attempts retried on DB_UNAVAILABLE; all ${N} credited once ${creditedAllAfterMs} ms after it became writable; 0 failed jobs`,
      );
      passed = true;
    } finally {
      await load.close(!passed);
    }
  }, 180_000);
});
