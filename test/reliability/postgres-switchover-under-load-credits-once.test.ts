import { createDb, migrateDatabase, type Db } from '@mcb/core/db';
import { hasPgBouncer, startOwnPgBouncer, testServices, uniquePrefix, waitFor, type OwnPgBouncer } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';
import { startOwnReplicatedPostgres, type ReplicatedPostgres } from './helpers/own-replicated-postgres.ts';
import { ledgerFigures, startPayinLoad, type PayinLoad } from './helpers/payin-load.ts';

// The ledger rides through a Postgres switchover. A primary and a synchronous streaming standby of our own, PgBouncer
// in front, ingest and a worker (real processes) taking N pay-ins at a steady rate. Under that load:
//  A. the standby stops: COMMITs wait for it (statement_timeout does not end that wait) and the worker's gauge
//     shows them; the standby starts again and they go on;
//  B. a switchover, as an operator or Patroni does it: the old primary is made read-only and its sessions are ended
//     (fenced), the standby, caught up, is promoted, PgBouncer is pointed at it and reloaded.
// Checked on the new primary: every acknowledged callback credited exactly once, no job failed for good, no review
// opened, nothing written on the old primary after the switchover; measured: how long commits waited, and the time
// from the switchover to the first credit on the new primary.
const available = hasPgBouncer();
const N = 900;
const RATE = 25;
const STANDBY_STOP_AFTER_ACKS = 150;
const SWITCHOVER_AFTER_ACKS = 500;
const DATABASE = 'mcb_switchover';

interface Figures {
  stalledCommitsSeen: number;
  longestCommitWaitS: number;
  syncRepWaitersSeen: number;
  standbyDownMs: number;
  switchoverMs: number;
  firstCreditAfterSwitchoverMs: number;
  allCreditedAfterSwitchoverMs: number;
  readOnlyRetries: number;
}

/** A: stop the standby until the worker's gauge shows a COMMIT waiting over 5 s, then start it again. */
async function standbyOutage(pair: ReplicatedPostgres, load: PayinLoad, figures: Figures): Promise<void> {
  const stoppedAt = Date.now();
  await pair.standby.stop();
  await waitFor(
    async () => {
      figures.syncRepWaitersSeen = Math.max(
        figures.syncRepWaitersSeen,
        Number(
          (
            await pair.primary.query<{ n: string }>(
              "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
            )
          )[0]!.n,
        ),
      );
      figures.stalledCommitsSeen = Math.max(
        figures.stalledCommitsSeen,
        await load.metric('mcb_worker_commits_stalled'),
      );
      figures.longestCommitWaitS = Math.max(
        figures.longestCommitWaitS,
        await load.metric('mcb_worker_commit_wait_seconds'),
      );
      return figures.stalledCommitsSeen > 0;
    },
    {
      timeoutMs: 30_000,
      intervalMs: 200,
      message: `no stalled COMMIT on the gauge while the standby was down (log: ${load.logDir})`,
    },
  );
  await pair.standby.start();
  await pair.waitForSyncStandby();
  figures.standbyDownMs = Date.now() - stoppedAt;
  // The waiting COMMITs return once the standby has their WAL: the gauge goes back to 0.
  await waitFor(async () => (await load.metric('mcb_worker_commits_stalled')) === 0, {
    timeoutMs: 30_000,
    intervalMs: 200,
    message: 'COMMITs still stalled',
  });
}

/** B: fence the old primary (read-only, sessions ended), promote the caught-up standby, move PgBouncer. */
async function switchover(
  pair: ReplicatedPostgres,
  bouncer: OwnPgBouncer,
  figures: Figures,
): Promise<{ at: number; lastOldLedgerId: number }> {
  const at = Date.now();
  await pair.primary.query('ALTER SYSTEM SET default_transaction_read_only = on');
  await pair.primary.query('SELECT pg_reload_conf()');
  // Transactions that began before the reload are still read-write: end them, as a demotion does.
  await pair.primary.query(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
  );
  await pair.waitForCatchUp();
  const lastOldLedgerId = Number(
    (await pair.primary.query<{ id: string | null }>('SELECT max(id) AS id FROM ledger_entries', DATABASE))[0]!.id ?? 0,
  );
  await pair.promote();
  await bouncer.retarget(pair.standby.url(DATABASE));
  figures.switchoverMs = Date.now() - at;
  return { at, lastOldLedgerId };
}

// Written reason: developer machines without Debian's pgbouncer package cannot run it; CI installs it.
describe.skipIf(!available && !process.env.CI)('a Postgres switchover under load', () => {
  it(`credits each of ${N} acknowledged callbacks exactly once on the new primary, through a standby outage and a switchover`, async () => {
    expect(available, 'pgbouncer is not installed (apt-get install pgbouncer)').toBe(true);
    const closers: (() => Promise<unknown>)[] = [];
    let passed = false;
    try {
      // 1. The pair, the schema (replicated to the standby), PgBouncer in front of the primary.
      const pair = await startOwnReplicatedPostgres();
      closers.push(() => pair.destroy());
      await migrateDatabase(pair.primary.url(DATABASE));
      const bouncer = await startOwnPgBouncer(pair.primary.url(DATABASE), { poolSize: 8 });
      closers.push(() => bouncer.destroy());
      const oldPrimary: Db = createDb(pair.primary.url(DATABASE), { max: 2, applicationName: 'mcb-test' });
      closers.push(() => oldPrimary.close());
      const load = await startPayinLoad({
        label: 'switch',
        count: N,
        db: oldPrimary,
        workerDatabaseUrl: bouncer.urlFor(pair.primary.url(DATABASE)),
        redisUrl: testServices().redisUrl,
        prefix: uniquePrefix('switch'),
      });
      closers.push(() => load.close(!passed));

      // 2. Send steadily; the standby outage at STANDBY_STOP_AFTER_ACKS, the switchover once it is over and
      //    SWITCHOVER_AFTER_ACKS are acknowledged.
      const figures: Figures = {
        stalledCommitsSeen: 0,
        longestCommitWaitS: 0,
        syncRepWaitersSeen: 0,
        standbyDownMs: 0,
        switchoverMs: 0,
        firstCreditAfterSwitchoverMs: 0,
        allCreditedAfterSwitchoverMs: 0,
        readOnlyRetries: 0,
      };
      let acked = 0;
      const reached = (n: number) =>
        waitFor(() => acked >= n, { timeoutMs: 120_000, intervalMs: 20, message: `${n} acknowledgements` });
      const faults = (async () => {
        await reached(STANDBY_STOP_AFTER_ACKS);
        await standbyOutage(pair, load, figures);
        await reached(SWITCHOVER_AFTER_ACKS);
        const done = await switchover(pair, bouncer, figures);
        // The first credit on the new primary, watched from the moment it is promoted.
        const newPrimary: Db = createDb(pair.standby.url(DATABASE), { max: 2, applicationName: 'mcb-test' });
        closers.push(() => newPrimary.close());
        await waitFor(
          async () =>
            (await newPrimary.pool.query('SELECT 1 FROM ledger_entries WHERE id > $1 LIMIT 1', [done.lastOldLedgerId]))
              .rowCount! > 0,
          { timeoutMs: 60_000, intervalMs: 50, message: `nothing credited on the new primary (log: ${load.logDir})` },
        );
        figures.firstCreditAfterSwitchoverMs = Date.now() - done.at;
        return { ...done, newPrimary };
      })();
      faults.catch(() => undefined); // awaited below; a failure must not be reported as unhandled first
      const acknowledged = await load.send(RATE, (n) => (acked = n));
      const { at: switchedAt, lastOldLedgerId, newPrimary } = await faults;
      expect(acknowledged).toBe(N);

      // 3. On the new primary: every acknowledged callback credited.
      await waitFor(async () => (await ledgerFigures(newPrimary.pool)).credited === N, {
        timeoutMs: 90_000,
        intervalMs: 250,
        message: `not every acknowledged callback was credited on the new primary (log: ${load.logDir})`,
      });
      figures.allCreditedAfterSwitchoverMs = Date.now() - switchedAt;

      // 4. Exactly once, nothing failed for good, no review, nothing written on the old primary after the fence.
      expect(await ledgerFigures(newPrimary.pool)).toEqual({ credited: N, doubleCredits: 0, reviews: 0, pending: 0 });
      expect((await load.jobCounts()).failed).toBe(0);
      const oldMax = Number(
        (await oldPrimary.pool.query<{ id: string | null }>('SELECT max(id) AS id FROM ledger_entries')).rows[0]!.id ??
          0,
      );
      expect(oldMax).toBe(lastOldLedgerId);
      expect(figures.stalledCommitsSeen).toBeGreaterThan(0);
      expect(figures.syncRepWaitersSeen).toBeGreaterThan(0);
      expect(await load.metric('mcb_worker_commits_stalled')).toBe(0);
      expect(load.exits).toEqual([]);
      figures.readOnlyRetries = await load.metric('mcb_worker_retries_total', 'code="DB_UNAVAILABLE"');
      console.log(
        `Postgres switchover under load (${N} pay-ins at ${RATE}/s through PgBouncer): standby down ${figures.standbyDownMs} ms, ` +
          `${figures.syncRepWaitersSeen} COMMIT(s) waiting on SyncRep, gauge ${figures.stalledCommitsSeen} stalled, longest wait seen ` +
          `${figures.longestCommitWaitS.toFixed(1)} s; switchover (fence, catch-up, promote, PgBouncer reload) ${figures.switchoverMs} ms; ` +
          `first credit on the new primary ${figures.firstCreditAfterSwitchoverMs} ms after the switchover began, all ${N} credited once ` +
          `${figures.allCreditedAfterSwitchoverMs} ms after (sending went on until ${N} were acknowledged); ${figures.readOnlyRetries} attempts retried on DB_UNAVAILABLE; 0 failed jobs, 0 reviews`,
      );
      passed = true;
    } finally {
      for (const c of closers.reverse()) await c().catch(() => undefined);
    }
  }, 180_000);
});
