import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { orders } from '@mcb/core/db';
import { callbackJobId, callbackJobOptions, CALLBACKS_QUEUE, type CallbackJobInput } from '@mcb/core/queue';
import {
  MERCHANT_NO,
  payinEvent,
  platformOrder,
  startFakePlatform,
  startOwnRedis,
  uid,
  useTestEnv,
  waitFor,
} from '@mcb/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startNodeProcess, type NodeProcess } from './helpers/node-process.ts';
import { captureLines, parseLine } from './helpers/output-lines.ts';

// Issue 32: a worker with jobs in flight when Redis goes away, then SIGTERM (a deploy during the incident). Half of
// the jobs have committed their credit in Postgres but cannot record their completion in Redis; the other half still
// wait on a slow Get order. The worker must exit within its bound (forced: exit 1) and say which jobs it left. Redis
// comes back from its AOF (same port and directory), a new worker runs the abandoned jobs once their locks lapse, and
// every event is credited exactly once: the committed ones end as duplicates (the receipt), the others are credited.
const BOUND_MS = 3000;
const EXIT_SLACK_MS = 1000;
const COMMITTED = 10;
const WAITING = 10;

describe('a worker stopped with jobs in flight while Redis is gone', () => {
  const env = useTestEnv();

  it(`exits within its bound naming the ${COMMITTED + WAITING} jobs it left; after Redis returns a new worker credits each event once`, async () => {
    const closers: (() => Promise<unknown>)[] = [];
    const logDir = mkdtempSync(join(tmpdir(), 'mcb-worker-forced-'));
    try {
      const redis = await startOwnRedis();
      closers.push(() => redis.destroy());
      const platform = await startFakePlatform();
      closers.push(() => platform.close());

      // 1. Our orders, the platform's final answers, one job per event.
      const run = uid();
      const events: CallbackJobInput[] = [];
      for (let i = 0; i < COMMITTED + WAITING; i++) {
        const merchantOrderNo = `FS-${run}-${i < COMMITTED ? 'c' : 'w'}-${i}`;
        const orderNo = `P${merchantOrderNo}`;
        await env.db.db.insert(orders).values({
          merchantOrderNo,
          kind: 'payin',
          amount: '12.50',
          currency: 'PHP',
          requestHash: `t-${merchantOrderNo}`,
        });
        platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"12.50"' }));
        events.push(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '12.50' }));
      }
      const jobIds = events.map((e) => callbackJobId(e.kind, e.orderNo, e.state));
      const producer = new Redis(redis.url, { maxRetriesPerRequest: 1 });
      producer.on('error', () => undefined); // Redis is killed below on purpose
      const queue = new Queue<CallbackJobInput>(CALLBACKS_QUEUE, { connection: producer, prefix: env.prefix });
      queue.on('error', () => undefined);
      closers.push(async () => {
        await queue.close().catch(() => undefined);
        producer.disconnect();
      });
      await queue.addBulk(
        events.map((e, i) => ({ name: e.kind, data: e, opts: { ...callbackJobOptions, jobId: jobIds[i] } })),
      );

      // 2. A slow platform: every Get order waits, so every job is in flight in the first worker.
      const releaseCommitted = platform.hold((no) => no.includes('-c-'));
      const releaseWaiting = platform.hold((no) => no.includes('-w-'));
      const workerEnv = {
        MERCHANT_NO,
        REDIS_URL: redis.url,
        QUEUE_PREFIX: env.prefix,
        DATABASE_URL: env.databaseUrl,
        PLATFORM_BASE_URL: platform.url,
        PLATFORM_ALLOW_HTTP: 'true',
        WORKER_METRICS_PORT: '0',
        LOG_LEVEL: 'info',
        WORKER_SHUTDOWN_TIMEOUT: `${BOUND_MS}ms`,
        // Abandoned jobs run again once their lock lapses and a stalled check sees it: short here, 30 s by default.
        WORKER_LOCK_DURATION: '4s',
        WORKER_STALLED_INTERVAL: '1s',
      };
      const first: NodeProcess = startNodeProcess(
        'worker-1',
        'apps/worker/src/main.ts',
        workerEnv,
        join(logDir, 'worker-1.log'),
      );
      closers.push(() => first.kill());
      const firstOutput = captureLines(first);
      await waitFor(() => platform.held() === COMMITTED + WAITING, {
        timeoutMs: 60_000,
        message: `jobs did not all reach Get order (logs: ${logDir})`,
      });

      // 3. Redis dies. Half the Get orders answer: those jobs commit their credit, but cannot record their completion.
      await redis.kill();
      releaseCommitted();
      const receipts = async () =>
        (await env.db.pool.query<{ n: number }>('select count(*)::int as n from callback_receipts')).rows[0]!.n;
      await waitFor(async () => (await receipts()) === COMMITTED, {
        timeoutMs: 30_000,
        message: 'the answered jobs did not commit',
      });

      // 4. SIGTERM: the worker exits within its bound, forced (exit 1), naming every job it left in progress.
      const signalled = performance.now();
      process.kill(first.pid, 'SIGTERM');
      const exit = await first.exited;
      const ms = performance.now() - signalled;
      expect(ms, `worker-1 took ${ms.toFixed(0)} ms to exit`).toBeLessThan(BOUND_MS + EXIT_SLACK_MS);
      expect([exit.code, exit.signal]).toEqual([1, null]);
      const lines = firstOutput.lines().map(parseLine);
      expect(lines.filter((l) => !l.ok)).toEqual([]);
      const forced = lines.flatMap((l) =>
        l.ok && String(l.value.msg).startsWith('stop forced:') && l.value.queue === 'callbacks' ? [l.value] : [],
      );
      expect(forced).toHaveLength(1);
      expect([...(forced[0]!.jobIds as string[])].sort()).toEqual([...jobIds].sort());
      expect(forced[0]!.jobsLeft).toBe(COMMITTED + WAITING);

      // 5. Redis returns with its AOF (same port, same directory): the jobs are still there, active, their locks lapsing.
      releaseWaiting(); // the platform answers again (worker-1's held requests meet closed sockets)
      await redis.start();
      const second = startNodeProcess('worker-2', 'apps/worker/src/main.ts', workerEnv, join(logDir, 'worker-2.log'));
      closers.push(() => second.stop(10_000));
      const secondOutput = captureLines(second);

      // 6. Every job completes once more; every event is credited exactly once.
      await waitFor(async () => (await queue.getJobCounts('completed')).completed === COMMITTED + WAITING, {
        timeoutMs: 90_000,
        message: `not every abandoned job completed after the restart (logs: ${logDir})`,
      });
      const q = async (sql: string) => (await env.db.pool.query<{ n: number }>(sql)).rows[0]!.n;
      expect(await receipts()).toBe(COMMITTED + WAITING);
      expect(await q("select count(*)::int as n from ledger_entries where entry_type = 'payin_credit'")).toBe(
        COMMITTED + WAITING,
      );
      expect(
        await q(
          'select count(*)::int as n from (select order_id from ledger_entries group by order_id having count(*) > 1) d',
        ),
      ).toBe(0);
      expect(await q("select count(*)::int as n from orders where status = 'pending'")).toBe(0);
      // The committed ones ran again and met their receipt; the others were credited by the second worker.
      const outcomes = await Promise.all(
        jobIds.map(
          async (id) => (await queue.getJob(id))?.returnvalue as { status?: string; outcome?: string } | undefined,
        ),
      );
      const byKind = (from: number, to: number) => outcomes.slice(from, to).map((o) => o?.status ?? 'missing');
      expect(new Set(byKind(0, COMMITTED))).toEqual(new Set(['duplicate']));
      expect(new Set(byKind(COMMITTED, COMMITTED + WAITING))).toEqual(new Set(['applied']));
      await second.stop(10_000);
      expect(
        secondOutput
          .lines()
          .map(parseLine)
          .filter((l) => !l.ok),
      ).toEqual([]);
      rmSync(logDir, { recursive: true, force: true });
    } finally {
      for (const c of closers.reverse()) await c().catch(() => undefined);
    }
  }, 240_000);
});
