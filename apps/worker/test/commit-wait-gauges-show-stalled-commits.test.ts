import { createMetricsRegistry } from '@mcb/core/metrics';
import { commitStarted } from '@mcb/settlement';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { registerCommitWaitGauges } from '../src/metrics.ts';

// The gauges read the COMMITs in flight at scrape time. A pool that never connects is enough: what is counted is
// the worker's own bookkeeping around COMMIT (a real stalled COMMIT, a synchronous standby stopped, is in
// test/reliability/postgres-switchover-under-load-credits-once.test.ts).
const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
afterAll(() => pool.end());

const value = async (registry: ReturnType<typeof createMetricsRegistry>, name: string) =>
  (await registry.getSingleMetric(name)!.get()).values[0]!.value;

describe('the stalled-COMMIT gauges', () => {
  it('count COMMITs in flight longer than 5 s and the oldest wait, and fall back to 0 once they return', async () => {
    const registry = createMetricsRegistry('worker-test');
    registerCommitWaitGauges(registry, pool);
    expect(await value(registry, 'mcb_worker_commits_stalled')).toBe(0);
    expect(await value(registry, 'mcb_worker_commit_wait_seconds')).toBe(0);

    const fresh = commitStarted(pool); // a COMMIT just sent: in flight, not stalled
    const stalled = commitStarted(pool, () => Date.now() - 12_000); // one that has waited 12 s
    expect(await value(registry, 'mcb_worker_commits_stalled')).toBe(1);
    expect(await value(registry, 'mcb_worker_commit_wait_seconds')).toBeGreaterThanOrEqual(12);

    stalled();
    fresh();
    expect(await value(registry, 'mcb_worker_commits_stalled')).toBe(0);
    expect(await value(registry, 'mcb_worker_commit_wait_seconds')).toBe(0);
  });
});
