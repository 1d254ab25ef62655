/**
 * The whole pipeline in one test process: sandbox (the platform) → ingest (public receiver) → BullMQ on the
 * file's own prefix → worker → the file's own Postgres database, plus the console app (inject only) to register
 * orders as the merchant's shop does. Everything is real except time, which the sandbox scales.
 */
import { generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis, type RedisClient, type RedisTarget } from '@mcb/core/redis';
import { queueTelemetry } from '@mcb/core/tracing';
import type { TestEnv } from '@mcb/testkit';
import { Queue } from 'bullmq';
import { buildApp as buildConsole } from '../../../apps/console/src/app.ts';
import { buildApp as buildIngest, checkRedisDurability, type IngestApp } from '../../../apps/ingest/src/app.ts';
import { buildApp as buildSandbox, type Simulator } from '../../../apps/sandbox/src/app.ts';
import { runWorker, type CallbackWorker } from '../../../apps/worker/src/index.ts';

export const MERCHANT_NO = 'M100001';
const CONSOLE_TOKEN = 'e2e-console-token-0123456789';

type FastifyInstance = Awaited<ReturnType<typeof buildConsole>>;

/** Options of {@link startPipeline}. */
export interface PipelineOptions {
  /** Sandbox time scale. @defaultValue 6000 (the 3-minute retry gap takes 30 ms) */
  timeScale?: number;
  /** Worker: how long an event may wait for its order. @defaultValue 15 min (the contract default) */
  orderGracePeriodMs?: number;
  /** Worker: how long Get order may report "not final". @defaultValue 2 h */
  confirmMaxWaitMs?: number;
  /** Where the worker and the console reach Postgres (e.g. through PgBouncer). @defaultValue the file's database */
  databaseUrl?: string;
  /** Jobs in flight in the worker. @defaultValue 8 */
  concurrency?: number;
  /** The Redis every part talks to (a Sentinel or Cluster target). @defaultValue the file's Redis URL */
  redis?: RedisTarget;
  /** Queue prefix (a cluster's needs a hash tag). @defaultValue the file's prefix */
  prefix?: string;
  /** The merchant's key pair (e.g. one whose private key is in a file, for an ingest process). @defaultValue a new 2048-bit pair */
  keys?: { privateKeyPem: string; publicKeyPem: string };
}

/** A running pipeline and handles on each part. */
export interface Pipeline {
  sandbox: FastifyInstance;
  sim: Simulator;
  sandboxUrl: string;
  ingest: IngestApp;
  ingestUrl: string;
  worker: CallbackWorker;
  queue: Queue;
  /** The queue prefix every part uses. */
  prefix: string;
  /** The worker's connection (holds the sweep lock as a worker process would). */
  workerRedis: RedisClient;
  /** The console, with the queue dashboard at /queues and POST /api/reconcile. */
  console: FastifyInstance;
  /** Send a request to the console as an operator (bearer token). */
  operator(
    method: 'GET' | 'POST' | 'PUT',
    url: string,
    payload?: Record<string, unknown>,
  ): Promise<{ statusCode: number; body: string }>;
  /** The merchant's public key, as uploaded to the platform. */
  publicKeyPem: string;
  /** Register a pay-in in the console (as the shop does before the customer pays). */
  registerPayin(merchantOrderNo: string, amount: string, currency?: string): Promise<void>;
  /** Register a payout in the console (validated against the sandbox's catalog). */
  registerPayout(merchantOrderNo: string, amount: string): Promise<void>;
  /** Our order with its ledger, receipts and reviews, straight from Postgres. */
  orderState(merchantOrderNo: string): Promise<OrderState>;
  close(): Promise<void>;
}

/** What the pipeline wrote about one order. */
export interface OrderState {
  status: string;
  ledger: { entryType: string; amount: string }[];
  receipts: { orderNo: string; state: number }[];
  reviews: { reasonCode: string; state: number; status: string }[];
}

/**
 * Start sandbox, ingest, worker and console for one test file on `env`'s database and prefix. Ingest gets the
 * volatile-Redis allowance only when the shared Redis is not durable (the local one keeps nothing on disk).
 */
export async function startPipeline(env: TestEnv, options: PipelineOptions = {}): Promise<Pipeline> {
  const logger = createLogger({ name: 'e2e', level: 'silent' });
  const pair = options.keys ?? generateKeyPair(2048);
  const closers: (() => Promise<unknown>)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    // 1. The platform, with its console default callback URLs set once ingest listens.
    const sandbox = await buildSandbox({
      merchantNo: MERCHANT_NO,
      merchantPublicKeyPem: pair.publicKeyPem,
      timeScale: options.timeScale ?? 6000,
      logger,
    });
    closers.push(() => sandbox.close());
    const sandboxUrl = await sandbox.listen({ host: '127.0.0.1', port: 0 });

    // 2. Ingest on its own producer connection and queue, with the file's prefix.
    const target: RedisTarget = options.redis ?? { kind: 'single', url: env.redisUrl };
    const prefix = options.prefix ?? env.prefix;
    const producer = createRedis(target, 'producer', { connectionName: 'e2e-ingest' });
    closers.push(async () => producer.disconnect());
    const queue = new Queue(CALLBACKS_QUEUE, { connection: producer, prefix, ...queueTelemetry() });
    closers.push(() => queue.close());
    await new Promise<void>((resolve) =>
      producer.status === 'ready' ? resolve() : producer.once('ready', () => resolve()),
    );
    const durable = (await checkRedisDurability(producer)).durable;
    const ingestConfig = loadConfig(
      {
        MERCHANT_NO,
        MERCHANT_PRIVATE_KEY_FILE: '/unused-in-process.pem',
        ...redisEnvOf(target),
        QUEUE_PREFIX: prefix,
        INGEST_ALLOW_VOLATILE_REDIS: durable ? 'false' : 'true',
        LOG_LEVEL: 'silent',
      },
      'ingest',
    );
    const ingest = await buildIngest({
      config: ingestConfig,
      queue,
      redis: producer,
      logger,
      keyRing: loadKeyRing([pair.privateKeyPem]),
    });
    closers.push(() => ingest.close());
    const ingestUrl = await ingest.listen({ host: '127.0.0.1', port: 0 });
    sandbox.sandbox.setCallbackUrls({
      payinCallbackUrl: `${ingestUrl}/callbacks/payin`,
      payoutCallbackUrl: `${ingestUrl}/callbacks/payout`,
    });

    // 3. The worker (runWorker, as a worker process builds it), confirming with the sandbox's Get order, writing to
    //    the file's database.
    const runner = await runWorker({
      config: loadConfig(
        {
          MERCHANT_NO,
          PLATFORM_BASE_URL: sandboxUrl,
          PLATFORM_ALLOW_HTTP: 'true',
          PLATFORM_TIMEOUT: '5s',
          DATABASE_URL: options.databaseUrl ?? env.databaseUrl,
          WORKER_DB_POOL: '6',
          WORKER_CONCURRENCY: String(options.concurrency ?? 8),
          WORKER_METRICS_PORT: '0',
          ...(options.orderGracePeriodMs === undefined
            ? {}
            : { ORDER_GRACE_PERIOD: `${options.orderGracePeriodMs}ms` }),
          ...(options.confirmMaxWaitMs === undefined ? {} : { CONFIRM_MAX_WAIT: `${options.confirmMaxWaitMs}ms` }),
          ...redisEnvOf(target),
          QUEUE_PREFIX: prefix,
          LOG_LEVEL: 'silent',
        },
        'worker',
      ),
      logger,
      tuning: { callbacks: { backoff: { baseMs: 20, capMs: 200 } } },
    });
    closers.push(() => runner.stop());
    const worker = runner.lane().callbacks;
    const workerRedis = runner.redis;
    // The console's own Get order client (the worker's lanes each have theirs).
    const platform: PlatformClient = createPlatformClient({
      baseUrl: sandboxUrl,
      merchantNo: MERCHANT_NO,
      timeoutMs: 5000,
    });
    closers.push(() => platform.close());

    // 4. The console (no listener: requests are injected), as the merchant's shop registers orders.
    const consoleDb = createDb(options.databaseUrl ?? env.databaseUrl, { max: 2 });
    closers.push(() => consoleDb.close());
    const consoleConfig = loadConfig(
      {
        MERCHANT_NO,
        PLATFORM_BASE_URL: sandboxUrl,
        PLATFORM_ALLOW_HTTP: 'true',
        CONSOLE_TOKEN,
        DATABASE_URL: env.databaseUrl,
        LOG_LEVEL: 'silent',
        ...redisEnvOf(target),
        QUEUE_PREFIX: prefix,
      },
      'console',
    );
    const consoleRedis = createRedis(target, 'producer', { connectionName: 'e2e-console', commandTimeoutMs: 5000 });
    closers.push(async () => consoleRedis.disconnect());
    const consoleQueue = new Queue(CALLBACKS_QUEUE, { connection: consoleRedis, prefix });
    closers.push(() => consoleQueue.close());
    const consoleApp = await buildConsole({
      config: consoleConfig,
      db: consoleDb,
      platform,
      logger,
      queue: consoleQueue,
      redis: consoleRedis,
    });
    closers.push(() => consoleApp.close());
    const operator: Pipeline['operator'] = async (method, url, payload) => {
      // Every action carries a reason: in the JSON body, and as X-Reason for the dashboard's (bull-board's) routes.
      const headers = { authorization: `Bearer ${CONSOLE_TOKEN}`, 'x-reason': 'e2e operator' };
      const body = method === 'GET' ? payload : { reason: 'e2e operator', ...payload };
      const res = await consoleApp.inject({ method, url, headers, ...(body ? { payload: body } : {}) });
      return { statusCode: res.statusCode, body: res.body };
    };

    const register = async (path: string, body: Record<string, unknown>) => {
      const res = await consoleApp.inject({
        method: 'POST',
        url: path,
        headers: { authorization: `Bearer ${CONSOLE_TOKEN}` },
        payload: { ...body, reason: 'e2e: the merchant registers its order' },
      });
      if (res.statusCode !== 201 && res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${res.body}`);
    };

    return {
      sandbox,
      sim: sandbox.sandbox,
      sandboxUrl,
      ingest,
      ingestUrl,
      worker,
      queue,
      prefix,
      workerRedis,
      console: consoleApp,
      operator,
      publicKeyPem: pair.publicKeyPem,
      registerPayin: (merchantOrderNo, amount, currency = 'INR') =>
        register('/api/payins', { merchantOrderNo, currency, amount }),
      registerPayout: (merchantOrderNo, amount) =>
        register('/api/payouts', {
          merchantOrderNo,
          currency: 'INR',
          amount,
          paymentMethod: 102,
          params: { accountName: 'Asha Rao', upiId: 'asha.rao@okaxis' },
        }),
      async orderState(merchantOrderNo) {
        const q = <T extends object>(sql: string) => env.db.pool.query<T>(sql, [merchantOrderNo]).then((r) => r.rows);
        const [order] = await q<{ status: string }>('select status from orders where merchant_order_no = $1');
        if (!order) throw new Error(`no order ${merchantOrderNo}`);
        const [ledger, receipts, reviewRows] = await Promise.all([
          q<{ entryType: string; amount: string }>(
            `select l.entry_type as "entryType", l.amount::text as amount from ledger_entries l
               join orders o on o.id = l.order_id where o.merchant_order_no = $1 order by l.id`,
          ),
          q<{ orderNo: string; state: number }>(
            'select order_no as "orderNo", state from callback_receipts where merchant_order_no = $1 order by id',
          ),
          q<{ reasonCode: string; state: number; status: string }>(
            'select reason_code as "reasonCode", state, status from reviews where merchant_order_no = $1 order by id',
          ),
        ]);
        return { status: order.status, ledger, receipts, reviews: reviewRows };
      },
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/** The config variables that name `target` (as a process of ours would be started). */
function redisEnvOf(target: RedisTarget): Record<string, string> {
  if (target.kind === 'single') return { REDIS_URL: target.url };
  if (target.kind === 'cluster')
    return { REDIS_CLUSTER_NODES: target.nodes.map((n) => `${n.host}:${n.port}`).join(',') };
  return {
    REDIS_SENTINELS: target.sentinels.map((n) => `${n.host}:${n.port}`).join(','),
    REDIS_SENTINEL_NAME: target.name,
  };
}
