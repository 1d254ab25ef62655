import { callbackArrivals, createDb } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobId, callbackJobOptions } from '@mcb/core/queue';
import { createOrder, lineSink, payinEvent, uid } from '@mcb/testkit';
import { workerTest } from '@mcb/testkit/worker';
import { inArray } from 'drizzle-orm';
import { describe, expect } from 'vitest';
import { createArrivalRecorder, type ArrivalRecorder } from '../src/arrival-recorder.ts';
import { startFailedRowsCheck } from '../src/failed-rows-check.ts';

// BullMQ's failed set is what the console's `failed` rows are checked against (issue 48): a failed job whose row is
// missing gets it; a payload no row can describe is left to the failed set; a Postgres that cannot be reached is
// logged and tried at the next interval, never thrown.
const silent = createLogger({ name: 'failed-rows-check-test', level: 'silent' });
/** A recorder that writes nothing: the jobs fail for good with no row, as after a worker stopped mid-outage. */
const forgetful: ArrivalRecorder = { taken: () => undefined, settled: () => undefined, flush: async () => undefined };
const it = workerTest.extend('harnessOptions', { scope: 'file' }, ({ platform }) => {
  // Every Get order fails from the start (the platform is down before the worker starts).
  platform.setOutage(503);
  return { arrivals: forgetful, failedRowsCheckMs: 0 };
});

describe('the failed-rows check', () => {
  it('writes a `failed` row for each failed job without one, skips a payload no row can describe, then finds nothing to do', async ({
    env,
    h,
  }) => {
    const no = `MO-FRC-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '12.5', currency: 'INR' });
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '12.5' });
    const good = callbackJobId('payin', event.orderNo, event.state);
    const bad = `payin-P${no}-bad-6`;
    await h.queue.add('payin', event, { ...callbackJobOptions, attempts: 1, jobId: good });
    await h.queue.add('payin', { nonsense: true } as never, { ...callbackJobOptions, attempts: 1, jobId: bad });
    for (const id of [good, bad]) expect(await (await h.settled(id)).getState()).toBe('failed');
    const rows = () =>
      env.db.db
        .select()
        .from(callbackArrivals)
        .where(inArray(callbackArrivals.jobId, [good, bad]));
    expect(await rows()).toEqual([]);

    const recorder = createArrivalRecorder(env.db.db, silent);
    const check = startFailedRowsCheck({ db: env.db.db, queue: h.queue, arrivals: recorder, logger: silent });
    try {
      expect(await check.runOnce()).toBe(1); // the first check, begun at start
      await recorder.flush();
      const written = await rows();
      expect(written).toHaveLength(1);
      expect(written[0]).toMatchObject({ jobId: good, status: 'failed', attempts: 1, merchantOrderNo: no });
      expect(written[0]!.lastDetail).toMatch(/503|PLATFORM/i);
      expect(await check.runOnce()).toBe(0); // its row is there now: the job is not read again
    } finally {
      await check.stop();
    }
  });

  it('logs a Postgres it cannot reach and resolves; nothing is thrown', async ({ h }) => {
    const { lines, destination } = lineSink();
    const logger = createLogger({ name: 'failed-rows-check-test', level: 'warn', destination });
    const nowhere = createDb('postgres://postgres@127.0.0.1:1/none', { max: 1, connectionTimeoutMs: 500 });
    const check = startFailedRowsCheck({
      db: nowhere.db,
      queue: h.queue,
      arrivals: createArrivalRecorder(nowhere.db, silent),
      logger,
    });
    try {
      expect(await check.runOnce()).toBe(0);
      expect(lines.join('')).toContain('failed-rows check: could not compare the failed set with the rows');
    } finally {
      await check.stop();
      await nowhere.close();
    }
  });
});
