import { describe, expect, it } from 'vitest';
import { callbackArrivals } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobSchema } from '@mcb/core/queue';
import { payinEvent, useTestEnv, waitFor } from '@mcb/testkit';
import type { Job } from 'bullmq';
import { eq } from 'drizzle-orm';
import { createArrivalRecorder, WORKER_ARRIVAL_WAITS } from '../src/arrival-recorder.ts';

const env = useTestEnv();
const silent = createLogger({ name: 'arrivals-test', level: 'silent' });
const fakeJob = (id: string, attemptsMade = 0) => ({ id, attemptsMade, timestamp: Date.now() }) as unknown as Job;
const event = (i: number) =>
  callbackJobSchema.parse(payinEvent({ orderNo: `P-AW-${i}`, merchantOrderNo: `MO-AW-${i}`, fiatAmount: `${i}.50` }));
const rowOf = async (jobId: string) =>
  (await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, jobId)))[0];

describe("the worker's arrival recorder (rows wait a little)", () => {
  it('a job that ends before its active row is written costs one row write, first seen when it was taken', async () => {
    const rows: number[] = [];
    const recorder = createArrivalRecorder(env.db.db, silent, {
      ...WORKER_ARRIVAL_WAITS,
      onBatch: (n) => rows.push(n),
    });
    const jobs = Array.from({ length: 20 }, (_, i) => fakeJob(`payin-P-AW-${i}-6`));
    const takenAt = Date.now();
    jobs.forEach((job, i) => recorder.taken(job, event(i)));
    await new Promise((r) => setTimeout(r, 50));
    jobs.forEach((job, i) => recorder.settled(job, event(i), { status: 'applied', outcome: 'credited' }));
    // 1. Outcome rows wait up to 100 ms, then go together: one statement of 20 rows, no active row before them.
    const row = await waitFor(() => rowOf('payin-P-AW-0-6'), { timeoutMs: 5000 });
    expect(row).toMatchObject({ status: 'applied', outcome: 'credited', attempts: 1 });
    expect(row.firstSeenAt.getTime()).toBeGreaterThanOrEqual(takenAt - 1);
    expect(row.firstSeenAt.getTime()).toBeLessThan(row.updatedAt.getTime());
    await recorder.flush();
    expect(rows).toEqual([20]);
  });

  it('a job still running after the wait shows as active; close writes what is held', async () => {
    const recorder = createArrivalRecorder(env.db.db, silent, WORKER_ARRIVAL_WAITS);
    recorder.taken(fakeJob('payin-P-AW-100-6'), event(100));
    const active = await waitFor(() => rowOf('payin-P-AW-100-6'), { timeoutMs: 5000 });
    expect(active).toMatchObject({ status: 'active', attempts: 1 });
    recorder.taken(fakeJob('payin-P-AW-101-6'), event(101));
    recorder.settled(fakeJob('payin-P-AW-100-6'), event(100), { status: 'review', code: 'VERIFY_AMOUNT_MISMATCH' });
    await recorder.flush();
    expect(await rowOf('payin-P-AW-100-6')).toMatchObject({ status: 'review', lastCode: 'VERIFY_AMOUNT_MISMATCH' });
    expect(await rowOf('payin-P-AW-101-6')).toMatchObject({ status: 'active' });
  });
});
