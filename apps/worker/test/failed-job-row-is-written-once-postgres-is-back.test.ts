import { callbackArrivals, createDb } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobId, callbackJobOptions } from '@mcb/core/queue';
import { payinEvent, startTcpProxy, uid, waitFor, type TestEnv } from '@mcb/testkit';
import { workerTest } from '@mcb/testkit/worker';
import { eq } from 'drizzle-orm';
import { describe, expect } from 'vitest';
import { createArrivalRecorder } from '../src/arrival-recorder.ts';

// Issue 37: jobs that used up their attempts while Postgres was down had their final `failed` row dropped, so replay
// by filter and its dry run (which read callback_arrivals) matched 0 jobs: the runbook's own remedy found nothing.
const it = workerTest
  .extend('proxy', { scope: 'file' }, async ({ env }, { onCleanup }) => {
    const target = new URL(env.databaseUrl);
    const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    onCleanup(() => proxy.close());
    return proxy;
  })
  .extend('harnessOptions', { scope: 'file' }, ({ env, proxy }, { onCleanup }) => {
    const through = new URL(env.databaseUrl);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    const pool = createDb(through.toString(), { max: 2, connectionTimeoutMs: 500 });
    onCleanup(() => pool.close());
    const logger = createLogger({ name: 'failed-row-test', level: 'silent' });
    return {
      workerDatabaseUrl: through.toString(),
      arrivals: createArrivalRecorder(pool.db, logger, { retryFinalMs: 100 }),
    };
  });

const rowOf = async (env: TestEnv, jobId: string) =>
  (await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, jobId)))[0];

describe('a job that fails for good while Postgres is unreachable', () => {
  it('gets its `failed` row once Postgres is back, so search, the dry run and replay find it', async ({
    env,
    h,
    proxy,
  }) => {
    const no = `PI-${uid()}`;
    await proxy.cut();
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '5' });
    const jobId = callbackJobId('payin', event.orderNo, event.state);
    await h.queue.add('payin', event, { ...callbackJobOptions, attempts: 2, jobId });
    const failed = await h.settled(jobId);
    expect(await failed.getState()).toBe('failed');
    expect(failed.attemptsMade).toBe(2);
    expect(failed.failedReason).toMatch(/DB_UNAVAILABLE|ECONNREFUSED|connect/i);
    expect(await rowOf(env, jobId)).toBeUndefined(); // nothing could be written meanwhile

    await proxy.restore();
    const row = await waitFor(
      async () => {
        const r = await rowOf(env, jobId);
        return r?.status === 'failed' ? r : undefined;
      },
      { message: 'the failed row was never written' },
    );
    expect(row).toMatchObject({ merchantOrderNo: no, attempts: 2, status: 'failed' });
    expect(row.lastCode).not.toBeNull();
  });
});
