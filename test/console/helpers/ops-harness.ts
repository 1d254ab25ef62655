import { payinEvent, startFakePlatform, uid, waitFor, type FakePlatform } from '@mcb/testkit';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '@mcb/core/config';
import { callbackArrivals, ledgerEntries, orders, type Database } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { callbackJobId, callbackJobOptions, CALLBACKS_QUEUE, type CallbackJobInput } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import type { BackoffOptions } from '@mcb/settlement';
import type { TestEnv } from '@mcb/testkit';
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { buildApp, type ConsoleDeps } from '../../../apps/console/src/app.ts';
import { runWorker, type CallbackWorker, type WorkerRunner } from '../../../apps/worker/src/index.ts';

export const MERCHANT_NO = 'M100200';

/** The console's bearer token in these tests. */
export const TOKEN = 'test-console-token-0123456789abcdef';

/** The console's session key (CONSOLE_SESSION_SECRET) in these tests. */
export const SESSION_SECRET = 'test-console-session-secret-0123456789abcdef';

/** A console with the dashboard, a callbacks queue, optionally a worker, and a local Get order platform. */
export interface OpsStack {
  app: FastifyInstance;
  queue: Queue<CallbackJobInput>;
  platform: FakePlatform;
  client: PlatformClient;
  worker?: CallbackWorker;
  /** Base URL when started with `listen: true`. */
  url?: string;
  /** Enqueue an event as ingest does, with `attempts` (default 2) so failures end quickly. */
  add(event: CallbackJobInput, attempts?: number): Promise<string>;
  close(): Promise<void>;
}

/** The worker's settings a console test changes. */
export interface OpsWorkerOptions {
  /** The worker's database handle (one through a proxy). @defaultValue the test's own */
  db?: Database;
  /** Jobs in flight (WORKER_CONCURRENCY). @defaultValue 4 */
  concurrency?: number;
  /** WORKER_MAX_UNKNOWN_WAITING. @defaultValue the config's */
  maxUnknownWaiting?: number;
  backoff?: BackoffOptions;
  failedRowsCheckMs?: number;
}

export interface OpsStackOptions {
  /** Run a callback worker too. @defaultValue false */
  worker?: boolean | OpsWorkerOptions;
  /** Listen on 127.0.0.1 port 0 (for a browser). @defaultValue false */
  listen?: boolean;
  consoleDeps?: Partial<ConsoleDeps>;
  /** More of the console's environment (e.g. the worker's settings the replay dry run reads). @defaultValue none */
  configEnv?: Record<string, string>;
}

/**
 * These tests send wrong tokens on purpose, far more than the failed-authentication limit allows from one address;
 * the limit itself has its own test (console-locks-out-repeated-failed-authentication).
 */
export const AUTH_LIMITS_OFF = { CONSOLE_AUTH_MAX_FAILURES: '1000000', CONSOLE_AUTH_MAX_FAILURES_GLOBAL: '1000000' };

export async function startOpsStack(env: TestEnv, options: OpsStackOptions = {}): Promise<OpsStack> {
  const platform = await startFakePlatform();
  const logger = createLogger({
    name: 'ops-test',
    level: (process.env.TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent',
  });
  const client = createPlatformClient({ baseUrl: platform.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
  const connections: Redis[] = [];
  const redis = createRedis(env.redisUrl, 'worker');
  connections.push(redis);
  const queue = new Queue<CallbackJobInput>(CALLBACKS_QUEUE, { connection: redis, prefix: env.prefix });
  const config = loadConfig(
    {
      MERCHANT_NO,
      PLATFORM_BASE_URL: platform.url,
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: TOKEN,
      CONSOLE_SESSION_SECRET: SESSION_SECRET,
      DATABASE_URL: env.databaseUrl,
      LOG_LEVEL: 'silent',
      ...AUTH_LIMITS_OFF,
      ...options.configEnv,
    },
    'console',
  );
  const app = await buildApp({
    config,
    db: env.db,
    platform: client,
    logger,
    queue: queue as Queue,
    ...options.consoleDeps,
  });
  let url: string | undefined;
  if (options.listen) {
    await app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  } else {
    await app.ready();
  }
  let runner: WorkerRunner | undefined;
  if (options.worker) {
    // The worker as a worker process builds it (runWorker), on the test's database handle unless the test gives one.
    const tuned = typeof options.worker === 'object' ? options.worker : {};
    runner = await runWorker({
      config: loadConfig(
        {
          MERCHANT_NO,
          PLATFORM_BASE_URL: platform.url,
          PLATFORM_ALLOW_HTTP: 'true',
          PLATFORM_TIMEOUT: '2s',
          PLATFORM_MAX_RPS: '0',
          REDIS_URL: env.redisUrl,
          QUEUE_PREFIX: env.prefix,
          DATABASE_URL: env.databaseUrl,
          WORKER_CONCURRENCY: String(tuned.concurrency ?? 4),
          ...(tuned.maxUnknownWaiting === undefined
            ? {}
            : { WORKER_MAX_UNKNOWN_WAITING: String(tuned.maxUnknownWaiting) }),
          WORKER_METRICS_PORT: '0',
          LOG_LEVEL: 'silent',
        },
        'worker',
      ),
      logger,
      clients: { database: tuned.db ?? env.db.db },
      tuning: {
        callbacks: {
          backoff: tuned.backoff ?? { baseMs: 10, capMs: 50 },
          ...(tuned.failedRowsCheckMs === undefined ? {} : { failedRowsCheckMs: tuned.failedRowsCheckMs }),
        },
        // As the console's own client does (unguarded): a failure is the job's, never a breaker's.
        guard: { failuresToOpen: Number.MAX_SAFE_INTEGER },
      },
    });
  }
  const worker = runner?.lane().callbacks;
  return {
    app,
    queue,
    platform,
    client,
    worker,
    url,
    async add(event, attempts = 2) {
      const jobId = callbackJobId(event.kind, event.orderNo, event.state);
      await queue.add(event.kind, event, { ...callbackJobOptions, attempts, jobId });
      return jobId;
    },
    async close() {
      await runner?.stop();
      await app.close();
      await queue.close();
      await client.close();
      await platform.close();
      await Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}

/** Log in through POST /login as a browser would; returns the Cookie header value. */
export async function login(app: FastifyInstance): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/login',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      origin: 'http://console.test',
      host: 'console.test',
    },
    payload: new URLSearchParams({ token: TOKEN, next: '/queues' }).toString(),
  });
  if (res.statusCode !== 303) throw new Error(`login failed: ${res.statusCode} ${res.body}`);
  const cookie = String(res.headers['set-cookie']).split(';')[0]!;
  return cookie;
}

/** Headers of a same-origin browser request with the session cookie. */
export const browserHeaders = (cookie: string) => ({ cookie, origin: 'http://console.test', host: 'console.test' });

/** Ledger entries of one of our orders. */
export async function ledgerOf(db: Database, merchantOrderNo: string) {
  const [order] = await db.select().from(orders).where(eq(orders.merchantOrderNo, merchantOrderNo));
  if (!order) throw new Error(`no order ${merchantOrderNo}`);
  return { order, ledger: await db.select().from(ledgerEntries).where(eq(ledgerEntries.orderId, order.id)) };
}

/**
 * A pay-in job of `amount` in BullMQ's failed set (failed for good by a worker of its own, as a Get order 500 would)
 * and its `failed` row as the worker reports it, received a minute ago: what a replay by filter finds. Its order
 * numbers are `MO-{tag}-…` and `P-{tag}-…`.
 */
export async function failedPayinJob(
  env: TestEnv,
  stack: OpsStack,
  tag: string,
  amount: string,
): Promise<{ jobId: string; merchantOrderNo: string }> {
  const no = uid();
  const event = payinEvent({ merchantOrderNo: `MO-${tag}-${no}`, orderNo: `P-${tag}-${no}`, fiatAmount: amount });
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
    amount,
    receivedAt: at,
    firstSeenAt: at,
    updatedAt: at,
    attempts: 1,
    status: 'failed',
    lastCode: 'PLATFORM_HTTP_ERROR',
  });
  return { jobId, merchantOrderNo: event.merchantOrderNo };
}
