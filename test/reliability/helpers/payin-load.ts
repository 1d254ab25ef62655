/**
 * Ingest and a worker as production runs them (their own processes), fed genuine pay-in callbacks at a steady rate,
 * and the checks every Postgres fault test makes. Redis is the shared one under the test's own prefix: these tests
 * break Postgres, not Redis (so ingest is allowed its volatile Redis).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { orders, type Db } from '@mcb/core/db';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { deletePrefix, freePort, platformOrder, startFakePlatform, waitFor, type FakePlatform } from '@mcb/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type pg from 'pg';
import { callbackBody, payinRecord } from './callbacks.ts';
import { createTestKeys } from './keys.ts';
import { startNodeProcess, type NodeProcess } from './node-process.ts';

/** Options of {@link startPayinLoad}. */
export interface PayinLoadOptions {
  /** Names the orders, the log folder and the queue prefix. */
  label: string;
  /** Pay-ins registered and sent. */
  count: number;
  /** Where the orders are registered: Postgres itself, the primary. */
  db: Db;
  /** The worker's DATABASE_URL (Postgres or PgBouncer). */
  workerDatabaseUrl: string;
  redisUrl: string;
  prefix: string;
  /** More environment for the worker. */
  workerEnv?: Record<string, string>;
}

/** A running ingest and worker with their callbacks ready to send. */
export interface PayinLoad {
  /** Every app process exit that nobody asked for. */
  exits: string[];
  logDir: string;
  /** Send every callback, `ratePerSecond` of them a second, each re-sent until acknowledged; `onAck` after each. */
  send(ratePerSecond: number, onAck?: (acknowledged: number) => void): Promise<number>;
  /** The sum of the worker's series of metric `name` whose labels contain each of `labels` (`code="X"`). */
  metric(name: string, ...labels: string[]): Promise<number>;
  /** Callback jobs by state (`failed` is the set of jobs that failed for good). */
  jobCounts(): Promise<Record<string, number>>;
  /** Stop the processes and the platform, delete the prefix; the logs stay when a process died or `keepLogs`. */
  close(keepLogs?: boolean): Promise<void>;
}

export async function startPayinLoad(options: PayinLoadOptions): Promise<PayinLoad> {
  const merchantNo = `M-${options.label}`;
  const closers: (() => Promise<unknown>)[] = [];
  const logDir = mkdtempSync(join(tmpdir(), `mcb-${options.label}-logs-`));
  const exits: string[] = [];
  let closing = false;
  const close = async (keepLogs = false) => {
    closing = true;
    for (const c of closers.reverse()) await c().catch(() => undefined);
    closers.length = 0;
    if (!keepLogs && exits.length === 0) rmSync(logDir, { recursive: true, force: true });
  };
  try {
    // Last: the prefix goes once no process can write under it any more.
    closers.push(() => deletePrefix(options.redisUrl, options.prefix));
    const keys = createTestKeys();
    closers.push(async () => keys.remove());
    const platform: FakePlatform = await startFakePlatform();
    closers.push(() => platform.close());

    // 1. Registered pay-ins the platform confirms, and their encrypted callbacks.
    const records = Array.from({ length: options.count }, (_, i) =>
      payinRecord(merchantNo, { MerchantOrderNo: `${options.label}-${i}`, FiatCurrency: 100.5 }),
    );
    for (let i = 0; i < records.length; i += 500) {
      await options.db.db.insert(orders).values(
        records.slice(i, i + 500).map((r) => ({
          merchantNo,
          merchantOrderNo: String(r.MerchantOrderNo),
          kind: 'payin' as const,
          amount: '100.5',
          currency: 'INR',
          requestHash: `t-${String(r.MerchantOrderNo)}`,
        })),
      );
    }
    for (const r of records) {
      platform.setOrder(
        platformOrder({
          orderNo: String(r.OrderNo),
          merchantOrderNo: String(r.MerchantOrderNo),
          merchantNo,
          type: 'payin',
          state: 6,
          amountJson: '100.5',
          currency: 'INR',
        }),
      );
    }
    const bodies = records.map((r) => callbackBody(r, keys.publicKeyPem));

    // 2. Ingest and a worker, their own processes; the worker's metrics on a port of its own.
    const redisEnv = {
      REDIS_URL: options.redisUrl,
      QUEUE_PREFIX: options.prefix,
      MERCHANT_NO: merchantNo,
      LOG_LEVEL: 'info',
    };
    const watch = (p: NodeProcess) => {
      void p.exited.then(({ code, signal }) => {
        if (!closing) exits.push(`${p.name} exited: ${code ?? signal}`);
      });
      closers.push(() => p.stop(5000));
      return p;
    };
    const ingestPort = await freePort();
    const metricsPort = await freePort();
    watch(
      startNodeProcess(
        'ingest',
        'apps/ingest/src/main.ts',
        {
          ...redisEnv,
          MERCHANT_PRIVATE_KEY_FILE: keys.privateKeyFile,
          INGEST_HOST: '127.0.0.1',
          INGEST_PORT: String(ingestPort),
          INGEST_METRICS_PORT: '0',
          INGEST_WORKERS: '1',
          INGEST_ALLOW_VOLATILE_REDIS: 'true',
        },
        join(logDir, 'ingest.log'),
      ),
    );
    const worker = watch(
      startNodeProcess(
        'worker',
        'apps/worker/src/main.ts',
        {
          ...redisEnv,
          DATABASE_URL: options.workerDatabaseUrl,
          PLATFORM_BASE_URL: platform.url,
          PLATFORM_ALLOW_HTTP: 'true',
          PLATFORM_TIMEOUT: '2s',
          WORKER_METRICS_PORT: String(metricsPort),
          ...options.workerEnv,
        },
        join(logDir, 'worker.log'),
      ),
    );
    const ingestUrl = `http://127.0.0.1:${ingestPort}`;
    await waitFor(async () => (await fetch(`${ingestUrl}/readyz`).catch(() => undefined))?.status === 200, {
      timeoutMs: 60_000,
      message: `ingest did not become ready (log: ${logDir}/ingest.log)`,
    });
    await worker.waitForOutput(/worker started/, 60_000);

    const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1 });
    closers.push(async () => redis.disconnect());
    const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: options.prefix });
    closers.push(() => queue.close());

    const send = async (ratePerSecond: number, onAck?: (acknowledged: number) => void) => {
      let acknowledged = 0;
      const started = Date.now();
      await Promise.all(
        bodies.map(async (body, i) => {
          await delay(Math.max(0, started + (i * 1000) / ratePerSecond - Date.now()));
          const deadline = Date.now() + 120_000;
          for (;;) {
            const reply = await fetch(`${ingestUrl}/callbacks/payin`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body,
            })
              .then(async (r) => `${r.status} ${await r.text()}`)
              .catch(() => 'no reply');
            if (reply === '200 success') break;
            if (Date.now() > deadline)
              throw new Error(`callback ${i} never acknowledged (last reply: ${reply}; logs: ${logDir})`);
            await delay(50); // the platform would wait minutes before re-sending; the order of events is the same
          }
          onAck?.(++acknowledged);
        }),
      );
      return acknowledged;
    };
    const metric = async (name: string, ...labels: string[]) => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      let sum = 0;
      for (const line of text.split('\n')) {
        if (/^[^ {]+/.exec(line)?.[0] !== name) continue;
        if (labels.every((l) => line.includes(l))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
      return sum;
    };
    const jobCounts = () => queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
    return { exits, logDir, send, metric, jobCounts, close };
  } catch (e) {
    await close(true);
    throw e;
  }
}

/** What the ledger says of the pay-ins of a run: credits, doubles, reviews, orders still pending. */
export interface LedgerFigures {
  credited: number;
  doubleCredits: number;
  reviews: number;
  pending: number;
}

export async function ledgerFigures(pool: pg.Pool): Promise<LedgerFigures> {
  const one = async (sql: string) => Number((await pool.query<{ n: string }>(sql)).rows[0]!.n);
  return {
    credited: await one("SELECT count(*) AS n FROM ledger_entries WHERE entry_type = 'payin_credit'"),
    doubleCredits: await one(
      'SELECT count(*) AS n FROM (SELECT order_id FROM ledger_entries GROUP BY order_id HAVING count(*) > 1) d',
    ),
    reviews: await one('SELECT count(*) AS n FROM reviews'),
    pending: await one("SELECT count(*) AS n FROM orders WHERE status = 'pending'"),
  };
}
