import { describe, expect, it } from 'vitest';
import { callbackArrivals, createDb } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobSchema } from '@mcb/core/queue';
import { lineSink, payinEvent, useTestEnv } from '@mcb/testkit';
import type { Job } from 'bullmq';
import { asc, eq } from 'drizzle-orm';
import { createArrivalRecorder } from '../src/arrival-recorder.ts';

const env = useTestEnv();
const silent = createLogger({ name: 'arrivals-test', level: 'silent' });

/** What the recorder reads of a BullMQ job. */
const fakeJob = (id: string, attemptsMade = 0) => ({ id, attemptsMade, timestamp: Date.now() }) as unknown as Job;
const event = (i: number) =>
  callbackJobSchema.parse(payinEvent({ orderNo: `P-AR-${i}`, merchantOrderNo: `MO-AR-${i}`, fiatAmount: `${i}.50` }));

describe('the arrival recorder', () => {
  it('writes 500 concurrent reports in a few upserts, not one statement per job; taken then settled in one batch collapse', async () => {
    const batches: number[] = [];
    const recorder = createArrivalRecorder(env.db.db, silent, { onBatch: (n) => batches.push(n) });
    for (let i = 0; i < 250; i++) {
      const job = fakeJob(`payin-P-AR-${i}-6`);
      recorder.taken(job, event(i));
      recorder.settled(
        job,
        event(i),
        i % 2
          ? { status: 'applied', outcome: 'credited' }
          : { status: 'failed', code: 'PLATFORM_HTTP_ERROR', detail: 'x'.repeat(400) },
      );
    }
    await recorder.flush();
    expect(batches.reduce((a, b) => a + b, 0)).toBe(500);
    expect(batches.length).toBeLessThanOrEqual(3); // 256 rows a statement at most
    const rows = await env.db.db.select().from(callbackArrivals).orderBy(asc(callbackArrivals.jobId));
    expect(rows).toHaveLength(250);
    const failed = rows.find((r) => r.jobId === 'payin-P-AR-0-6')!;
    expect(failed).toMatchObject({
      status: 'failed',
      lastCode: 'PLATFORM_HTTP_ERROR',
      merchantOrderNo: 'MO-AR-0',
      amount: '0.50',
      attempts: 1,
    });
    expect(failed.lastDetail).toHaveLength(300);
    expect(rows.find((r) => r.jobId === 'payin-P-AR-1-6')).toMatchObject({
      status: 'applied',
      outcome: 'credited',
      lastCode: null,
    });
  });

  it('keeps a row per merchant: two merchants’ jobs of one job id (an OrderNo the platform reused) never share one', async () => {
    // Held rows too: a taken row and an outcome wait, keyed by merchant and job id.
    const recorder = createArrivalRecorder(env.db.db, silent, { activeAfterMs: 200, outcomeWithinMs: 200 });
    const id = 'payin-P-AR-SHARED-6';
    const of = (merchantNo: string, fiatAmount: string) =>
      callbackJobSchema.parse({
        ...payinEvent({ orderNo: 'P-AR-SHARED', merchantOrderNo: `MO-${merchantNo}`, fiatAmount }),
        merchantNo,
      });
    const a = of('M-A', '10.00');
    const b = of('M-B', '99.00');
    recorder.taken(fakeJob(id), a);
    recorder.taken(fakeJob(id), b);
    recorder.settled(fakeJob(id), a, { status: 'applied', outcome: 'credited' });
    recorder.settled(fakeJob(id), b, { status: 'failed', code: 'PLATFORM_HTTP_ERROR' });
    await recorder.flush();
    // A later report of one merchant's job changes its row only.
    recorder.settled(fakeJob(id, 1), b, { status: 'failed', code: 'PLATFORM_TIMEOUT' });
    await recorder.flush();
    const rows = await env.db.db
      .select()
      .from(callbackArrivals)
      .where(eq(callbackArrivals.jobId, id))
      .orderBy(asc(callbackArrivals.merchantNo));
    expect(rows.map((r) => [r.merchantNo, r.merchantOrderNo, r.amount, r.status, r.lastCode, r.attempts])).toEqual([
      ['M-A', 'MO-M-A', '10.00', 'applied', null, 1],
      ['M-B', 'MO-M-B', '99.00', 'failed', 'PLATFORM_TIMEOUT', 2],
    ]);
  });

  it('records taken only on a first attempt; a later attempt updates the row; an older report changes nothing', async () => {
    const recorder = createArrivalRecorder(env.db.db, silent);
    const id = 'payin-P-AR-900-6';
    const e900 = event(900); // one job, one payload: its arrival time is the same in every report
    recorder.taken(fakeJob(id), e900);
    await recorder.flush();
    const [first] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, id));
    expect(first).toMatchObject({ status: 'active', attempts: 1 });

    recorder.taken(fakeJob(id, 1), e900); // a retry: no write
    recorder.settled(fakeJob(id, 1), e900, { status: 'retrying', code: 'PLATFORM_TIMEOUT' });
    await recorder.flush();
    const [second] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, id));
    expect(second).toMatchObject({ status: 'retrying', attempts: 2, lastCode: 'PLATFORM_TIMEOUT' });
    expect(second!.firstSeenAt).toEqual(first!.firstSeenAt);

    // A stalled attempt's late word (an earlier attempt), even stamped a minute later by its host's clock: ignored.
    const late = createArrivalRecorder(env.db.db, silent, { now: () => Date.now() + 60_000 });
    late.settled(fakeJob(id, 0), e900, { status: 'failed', code: 'OLD' });
    await late.flush();
    const [third] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, id));
    expect(third).toMatchObject({ status: 'retrying', lastCode: 'PLATFORM_TIMEOUT' });
  });

  it('stores any detail text as it was: quotes, braces, backslashes, commas and the word NULL (array parameters)', async () => {
    const recorder = createArrivalRecorder(env.db.db, silent);
    const detail = 'platform said "no", {x,y} \\ C:\\path NULL';
    recorder.settled(fakeJob('payin-P-AR-950-6'), event(950), { status: 'retrying', code: 'NULL', detail });
    recorder.settled(fakeJob('payout-P-AR-951-4'), { ...event(951), kind: 'payout' } as never, {
      status: 'applied',
      outcome: 'succeeded',
    });
    await recorder.flush();
    const rows = await env.db.db.select().from(callbackArrivals).orderBy(asc(callbackArrivals.jobId));
    expect(rows.find((r) => r.jobId === 'payin-P-AR-950-6')).toMatchObject({
      lastDetail: detail,
      lastCode: 'NULL',
      outcome: null,
      amount: '950.50',
    });
    expect(rows.find((r) => r.jobId === 'payout-P-AR-951-4')).toMatchObject({
      kind: 'payout',
      amount: null,
      lastDetail: null,
    });
  });

  it('never throws into the job when Postgres is unreachable: it logs one line and goes on', async () => {
    const sink = lineSink();
    const logger = createLogger({ name: 'arrivals-test', level: 'warn', destination: sink.destination });
    const down = createDb('postgres://postgres@127.0.0.1:1/nowhere', { max: 1, connectionTimeoutMs: 500 });
    try {
      const recorder = createArrivalRecorder(down.db, logger);
      for (let i = 0; i < 10; i++) expect(() => recorder.taken(fakeJob(`payin-P-DOWN-${i}-6`), event(i))).not.toThrow();
      await recorder.flush();
      const warnings = sink.lines.filter((l) => l.includes('could not record callback arrivals'));
      expect(warnings).toHaveLength(1);
    } finally {
      await down.close();
    }
  });
});
