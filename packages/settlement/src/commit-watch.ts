import type pg from 'pg';

/**
 * The COMMITs in flight on each pool, so that a stalled one can be seen. With synchronous replication and the
 * standby gone, COMMIT waits for a standby that does not come (wait event SyncRep), and neither statement_timeout
 * nor the job's lock ends that wait: jobs simply hang in flight, credited locally but not acknowledged. The worker
 * exports how many have waited longer than a few seconds (`mcb_worker_commits_stalled`) and the
 * PostgresCommitsStalled alert names the standby as the likely cause (docs/runbook.md).
 *
 * Keyed by the pool, weakly: a closed pool and its entries go together, and each process or test sees only its own.
 */
const inFlight = new WeakMap<pg.Pool, Set<{ since: number }>>();

/** Note a COMMIT starting on `pool`; call the returned function once it has returned or failed. */
export function commitStarted(pool: pg.Pool, now: () => number = Date.now): () => void {
  let set = inFlight.get(pool);
  if (!set) inFlight.set(pool, (set = new Set()));
  const entry = { since: now() };
  set.add(entry);
  return () => set.delete(entry);
}

/** What the COMMITs in flight on a pool look like now. */
export interface CommitWaits {
  /** COMMITs in flight for longer than the threshold. */
  stalled: number;
  /** How long the oldest COMMIT in flight has waited, in ms (0 when none). */
  oldestMs: number;
}

/** The COMMITs in flight on `pool`, those waiting longer than `thresholdMs` counted as stalled. */
export function commitWaits(pool: pg.Pool, thresholdMs: number, now: number = Date.now()): CommitWaits {
  let stalled = 0;
  let oldestMs = 0;
  for (const { since } of inFlight.get(pool) ?? []) {
    const waited = now - since;
    if (waited > thresholdMs) stalled++;
    oldestMs = Math.max(oldestMs, waited);
  }
  return { stalled, oldestMs };
}
