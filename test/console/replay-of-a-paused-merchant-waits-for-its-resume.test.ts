import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, replays } from '@mcb/core/db';
import { payinEvent, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { UnrecoverableError, Worker } from 'bullmq';
import { eq } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

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
async function failedJob() {
  const no = uid();
  const event = payinEvent({ merchantOrderNo: `MO-PR-${no}`, orderNo: `P-PR-${no}`, fiatAmount: '12.00' });
  const jobId = await stack.add(event, 1);
  const failer = new Worker(
    stack.queue.name,
    async () => {
      throw new UnrecoverableError('Get order answered 500');
    },
    { connection: stack.queue.opts.connection, prefix: env.prefix },
  );
  try {
    await waitFor(async () => (await stack.queue.getJob(jobId))?.failedReason || undefined);
  } finally {
    await failer.close();
  }
  const at = new Date(Date.now() - 60_000);
  await env.db.db.insert(callbackArrivals).values({
    jobId,
    kind: 'payin',
    orderNo: event.orderNo,
    state: event.state,
    merchantOrderNo: event.merchantOrderNo,
    amount: '12.00',
    receivedAt: at,
    firstSeenAt: at,
    updatedAt: at,
    attempts: 1,
    status: 'failed',
    lastCode: 'PLATFORM_HTTP_ERROR',
  });
  return { jobId, merchantOrderNo: event.merchantOrderNo };
}

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
