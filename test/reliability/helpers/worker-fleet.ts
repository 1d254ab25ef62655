/**
 * Several worker processes (apps/worker/src/main.ts, each its own process) on one queue prefix, a platform double
 * that confirms a backlog of registered pay-ins (in a process of its own, so that it stamps each Get order when it
 * arrives: platform-process.ts), and the checks of the money: each credited once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { orders, type Db } from '@mcb/core/db';
import { callbackJobId, callbackJobOptions, CALLBACKS_QUEUE, type CallbackJobInput } from '@mcb/core/queue';
import { deletePrefix, MERCHANT_NO, payinEvent, platformOrder, uid, type FakeOrder } from '@mcb/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { startPlatformProcess, type SeparatePlatform } from './platform-process.ts';
import { startNodeProcess, type NodeProcess } from './node-process.ts';

export interface WorkerFleet {
  platform: SeparatePlatform;
  workers: NodeProcess[];
  /** A Redis connection of the test's own (to read the fleet's keys). */
  redis: Redis;
  /** Exits nobody asked for. */
  exits: string[];
  logDir: string;
  /** Put one job per pay-in in the queue (as ingest does). */
  enqueue(): Promise<void>;
  /** Pay-ins credited so far (receipts). */
  credited(): Promise<number>;
  /** Credits per order: [orders credited, orders credited more than once]. */
  creditsOnce(): Promise<{ credits: number; twice: number }>;
  close(): Promise<void>;
}

/** Register `payins` pay-ins the platform confirms and start `count` worker processes with `workerEnv`. */
export async function startWorkerFleet(options: {
  db: Db;
  databaseUrl: string;
  redisUrl: string;
  prefix: string;
  payins: number;
  count: number;
  workerEnv: Record<string, string>;
}): Promise<WorkerFleet> {
  const closers: (() => Promise<unknown>)[] = [];
  const logDir = mkdtempSync(join(tmpdir(), 'mcb-worker-fleet-logs-'));
  const exits: string[] = [];
  let closing = false;
  const close = async () => {
    closing = true;
    for (const c of closers.reverse()) await c().catch(() => undefined);
    closers.length = 0;
    if (exits.length === 0 && !process.env.KEEP_FLEET_LOGS) rmSync(logDir, { recursive: true, force: true });
  };
  try {
    closers.push(() => deletePrefix(options.redisUrl, options.prefix));
    const platform = await startPlatformProcess();
    closers.push(() => platform.close());
    const run = uid();
    const events: CallbackJobInput[] = [];
    const confirmed: FakeOrder[] = [];
    const rows: (typeof orders.$inferInsert)[] = [];
    for (let i = 0; i < options.payins; i++) {
      const merchantOrderNo = `FL-${run}-${i}`;
      const orderNo = `P${merchantOrderNo}`;
      rows.push({
        merchantOrderNo,
        kind: 'payin',
        amount: '40.25',
        currency: 'PHP',
        requestHash: `t-${merchantOrderNo}`,
      });
      confirmed.push(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"40.25"' }));
      events.push(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '40.25' }));
    }
    await platform.setOrders(confirmed);
    await options.db.db.insert(orders).values(rows);
    const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1 });
    closers.push(async () => redis.disconnect());
    const queue = new Queue<CallbackJobInput>(CALLBACKS_QUEUE, { connection: redis, prefix: options.prefix });
    closers.push(() => queue.close());

    const workers: NodeProcess[] = [];
    for (let w = 0; w < options.count; w++) {
      const p = startNodeProcess(
        `worker-${w}`,
        'apps/worker/src/main.ts',
        {
          MERCHANT_NO,
          REDIS_URL: options.redisUrl,
          QUEUE_PREFIX: options.prefix,
          DATABASE_URL: options.databaseUrl,
          PLATFORM_BASE_URL: platform.url,
          PLATFORM_ALLOW_HTTP: 'true',
          WORKER_METRICS_PORT: '0',
          LOG_LEVEL: 'info',
          ...options.workerEnv,
        },
        join(logDir, `worker-${w}.log`),
      );
      void p.exited.then(({ code, signal }) => {
        if (!closing) exits.push(`${p.name} exited: ${code ?? signal}`);
      });
      closers.push(() => p.stop(5000));
      workers.push(p);
    }
    await Promise.all(workers.map((w) => w.waitForOutput(/worker started/, 30_000)));
    const count = async (sql: string) => (await options.db.pool.query<{ n: number }>(sql)).rows[0]!.n;
    const mine = `merchant_order_no like 'FL-${run}-%'`;
    return {
      platform,
      workers,
      redis,
      exits,
      logDir,
      async enqueue() {
        const jobs = events.map((e) => ({
          name: e.kind,
          data: e,
          opts: { ...callbackJobOptions, jobId: callbackJobId(e.kind, e.orderNo, e.state) },
        }));
        for (let i = 0; i < jobs.length; i += 500) await queue.addBulk(jobs.slice(i, i + 500));
      },
      credited: () => count(`select count(*)::int as n from orders where status = 'credited' and ${mine}`),
      async creditsOnce() {
        const credits = await count(
          `select count(*)::int as n from ledger_entries l join orders o on o.id = l.order_id where l.entry_type = 'payin_credit' and o.${mine}`,
        );
        const twice = await count(
          `select count(*)::int as n from (select l.order_id from ledger_entries l join orders o on o.id = l.order_id where o.${mine} group by l.order_id having count(*) > 1) d`,
        );
        return { credits, twice };
      },
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/** Get order arrivals per whole second from the first of `arrivals` (performance.now() ms). */
export function perSecond(arrivals: number[]): number[] {
  if (arrivals.length === 0) return [];
  const t0 = Math.min(...arrivals);
  const buckets: number[] = [];
  for (const t of arrivals) {
    const s = Math.floor((t - t0) / 1000);
    buckets[s] = (buckets[s] ?? 0) + 1;
  }
  return Array.from(buckets, (n) => n ?? 0);
}

/** The most arrivals in any one-second window (sliding). */
export function busiestSecond(arrivals: number[]): number {
  const sorted = [...arrivals].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= 1000) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}
