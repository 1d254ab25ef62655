import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals } from '@mcb/core/db';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { failedPayinJob, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// Issue 48: the replay driver marked the jobs it sent back `retrying` with an update guarded by the status alone, so a
// job that ran and failed for good again between the driver's read and its update had its fresh `failed` row turned
// into `retrying`, and replay by filter never found it again. The race is made certain here: this test holds the
// job's row locked while it writes the fresh failure, so the driver's update waits for it and then sees it.

const env = useTestEnv();
let stack: OpsStack;

beforeAll(async () => {
  // No worker: a job sent back waits in the queue; the test plays the worker's part.
  stack = await startOpsStack(env, { consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await stack?.close();
});

/** A job in BullMQ's failed set, and its `failed` row as the worker reports it. */
const failedJob = () => failedPayinJob(env, stack, 'R', '81.00');

describe('the replay driver', () => {
  it('leaves a failed row written after its read as it is, so replay by filter finds the job again', async () => {
    const job = await failedJob();
    const filter = { merchantOrderNo: job.merchantOrderNo };
    const client = await env.db.pool.connect();
    try {
      // 1. The worker's report of a fresh failure, in a transaction still open: the row stays locked.
      await client.query('begin');
      await client.query(
        `update callback_arrivals set updated_at = now(), attempts = 2, last_detail = 'failed again' where job_id = $1`,
        [job.jobId],
      );
      // 2. The replay: the driver reads the old row, sends the job back, and its update waits for the lock.
      const started = await stack.app.inject({
        method: 'POST',
        url: '/api/replays',
        headers: bearer('operator'),
        payload: { filter, reason: 'after the outage', ratePerSecond: 10 },
      });
      expect(started.statusCode, started.body).toBe(202);
      await waitFor(
        async () => {
          const { rows } = await env.db.pool.query<{ n: number }>(
            `select count(*)::int as n from pg_stat_activity
              where datname = current_database() and wait_event_type = 'Lock' and query ilike 'update "callback_arrivals"%'`,
          );
          return rows[0]!.n > 0 || undefined;
        },
        { timeoutMs: 20_000, message: "the driver's update never waited on the row" },
      );
      // 3. The fresh failure commits first; then the driver's update runs against it.
      await client.query('commit');
    } finally {
      client.release();
    }
    // 4. The replay ends: its one job was sent back, and nothing else is in its set.
    const ended = await waitFor(async () => {
      const { rows } = await env.db.pool.query<{ status: string; replayed: number }>(
        `select status, replayed from replays where status <> 'running'`,
      );
      return rows[0];
    });
    expect(ended).toEqual({ status: 'finished', replayed: 1 });

    const [row] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, job.jobId));
    expect(row).toMatchObject({ status: 'failed', lastDetail: 'failed again' });
    const plan = await stack.app.inject({
      method: 'POST',
      url: '/api/replays',
      headers: bearer('operator'),
      payload: { filter, dryRun: true },
    });
    expect(plan.statusCode, plan.body).toBe(200);
    expect((plan.json() as { plan: { matched: number } }).plan.matched).toBe(1);
  });
});
