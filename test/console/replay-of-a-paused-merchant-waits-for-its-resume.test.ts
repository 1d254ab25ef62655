import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replays } from '@mcb/core/db';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { failedPayinJob, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// Issue 51: a paused merchant's replays wait. The console's replay driver sends none of its jobs back while the
// merchant is paused (the replay stays running, its lease renewed), and goes on from its cursor after the resume.

const env = useTestEnv();
let stack: OpsStack;

beforeAll(async () => {
  // No worker: a job sent back waits in the queue, where the test sees it.
  stack = await startOpsStack(env, { consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await stack?.close();
});

/** A job in BullMQ's failed set, and its `failed` row as the worker reports it. */
const failedJob = () => failedPayinJob(env, stack, 'PR', '12.00');

const act = (url: string, payload: object) =>
  stack.app.inject({ method: 'POST', url, headers: bearer('operator'), payload });

describe('a replay of a paused merchant', () => {
  it('sends nothing back while it is paused, and goes on after the resume', async () => {
    const job = await failedJob();
    // 1. The merchant is paused, then a replay of its failed job starts.
    expect((await act('/api/merchants/default/pause', { reason: 'platform incident' })).statusCode).toBe(200);
    const started = await act('/api/replays', {
      filter: { merchantOrderNo: job.merchantOrderNo },
      reason: 'after the incident',
      ratePerSecond: 10,
    });
    expect(started.statusCode, started.body).toBe(202);
    const id = (started.json() as { replay: { id: number } }).replay.id;
    const row = async () => (await env.db.db.select().from(replays).where(eq(replays.id, id)))[0]!;

    // 2. The driver holds it: three renewals of its lease go by, and the job is still failed, nothing replayed.
    const renewals = new Set<number>();
    await waitFor(
      async () => {
        const r = await row();
        if (r.leaseUntil) renewals.add(r.leaseUntil.getTime());
        return renewals.size >= 3;
      },
      { message: 'the driver did not take the replay' },
    );
    expect(await row()).toMatchObject({ status: 'running', replayed: 0 });
    expect(await stack.queue.getJobState(job.jobId)).toBe('failed');

    // 3. Resumed: the job is sent back and the replay finishes.
    expect((await act('/api/merchants/default/resume', { reason: 'incident over' })).statusCode).toBe(200);
    await waitFor(async () => (await row()).status === 'finished', { message: 'the replay did not go on' });
    expect(await row()).toMatchObject({ replayed: 1 });
    expect(await stack.queue.getJobState(job.jobId)).toBe('waiting');
  });
});
