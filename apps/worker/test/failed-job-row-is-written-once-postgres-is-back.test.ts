import { callbackArrivals, createDb, type Db } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobId, callbackJobOptions } from '@mcb/core/queue';
import { payinEvent, startFakePlatform, uid, useTestEnv, waitFor, type FakePlatform } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createArrivalRecorder } from '../src/arrival-recorder.ts';
import { startHarness, type Harness } from './helpers/harness.ts';
import { startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.ts';

// Issue 37: jobs that used up their attempts while Postgres was down had their final `failed` row dropped, so replay
// by filter and its dry run (which read callback_arrivals) matched 0 jobs: the runbook's own remedy found nothing.
const env = useTestEnv();
let platform: FakePlatform;
let proxy: TcpProxy;
let pool: Db;
let h: Harness;

beforeAll(async () => {
  platform = await startFakePlatform();
  const target = new URL(env.databaseUrl);
  proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  const through = new URL(env.databaseUrl);
  through.hostname = '127.0.0.1';
  through.port = String(proxy.port);
  pool = createDb(through.toString(), { max: 2, connectionTimeoutMs: 500 });
  const logger = createLogger({ name: 'failed-row-test', level: 'silent' });
  h = await startHarness(env, platform.url, {
    workerDatabaseUrl: through.toString(),
    arrivals: createArrivalRecorder(pool.db, logger, { retryFinalMs: 100 }),
  });
});
afterAll(async () => {
  await h?.close();
  await pool?.close();
  await proxy?.close();
  await platform?.close();
});

const rowOf = async (jobId: string) =>
  (await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, jobId)))[0];

describe('a job that fails for good while Postgres is unreachable', () => {
  it('gets its `failed` row once Postgres is back, so search, the dry run and replay find it', async () => {
    const no = `PI-${uid()}`;
    await proxy.cut();
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '5' });
    const jobId = callbackJobId('payin', event.orderNo, event.state);
    await h.queue.add('payin', event, { ...callbackJobOptions, attempts: 2, jobId });
    const failed = await h.settled(jobId);
    expect(await failed.getState()).toBe('failed');
    expect(failed.attemptsMade).toBe(2);
    expect(failed.failedReason).toMatch(/DB_UNAVAILABLE|ECONNREFUSED|connect/i);
    expect(await rowOf(jobId)).toBeUndefined(); // nothing could be written meanwhile

    await proxy.restore();
    const row = await waitFor(
      async () => {
        const r = await rowOf(jobId);
        return r?.status === 'failed' ? r : undefined;
      },
      { message: 'the failed row was never written' },
    );
    expect(row).toMatchObject({ merchantOrderNo: no, attempts: 2, status: 'failed' });
    expect(row.lastCode).not.toBeNull();
  });
});
