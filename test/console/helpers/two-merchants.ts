/**
 * A two-merchant stack for the console's tests: merchants `a` and `b` (MERCHANTS_FILE), each with its own fake
 * platform, one console (buildApp, listening, with both merchants' queues) and a worker runner (runWorker) on the
 * test's database and Redis. Pay-ins are put in a merchant's queue as ingest stores them (`enqueuePayins`), with their
 * orders registered and released at that merchant's platform. `restartWorker()` closes the runner and starts a new
 * one. The caller closes it all with `close()`.
 */
import type { AddressInfo } from 'node:net';
import { loadConfig, type Config } from '@mcb/core/config';
import { ledgerEntries } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { callbackJobId, callbackJobOptions } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import {
  createOrder,
  payinEvent,
  platformOrder,
  startFakePlatform,
  uid,
  writeMerchantsFile,
  type FakePlatform,
  type MerchantEntry,
  type TestEnv,
} from '@mcb/testkit';
import { Queue } from 'bullmq';
import { and, count, eq, gt } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { buildApp, type ConsoleDeps } from '../../../apps/console/src/app.ts';
import { merchantQueues, type MerchantQueues } from '../../../apps/console/src/callbacks/merchant-queues.ts';
import { AUTH_LIMITS_OFF, TOKEN } from '../../../apps/console/test/helpers/fake-platform.ts';
import { OPERATORS } from '../../../apps/console/test/helpers/operators.ts';
import { runWorker, type WorkerRunner } from '../../../apps/worker/src/index.ts';

export interface TwoMerchantsOptions {
  /** Each merchant's own MERCHANTS_FILE settings (getOrderRps, weight), by ref. @defaultValue none */
  entries?: Partial<Record<'a' | 'b', Partial<MerchantEntry>>>;
  /** More settings of the worker (e.g. WORKER_CONCURRENCY). @defaultValue none */
  workerEnv?: Record<string, string>;
  /** More of the console's deps. @defaultValue operators: OPERATORS, no replay driver */
  consoleDeps?: Partial<ConsoleDeps>;
}

export interface TwoMerchants {
  /** The console's base URL (http://127.0.0.1:port). */
  url: string;
  app: FastifyInstance;
  /** The merchants, by ref: their number and their platform. */
  merchants: Record<'a' | 'b', { ref: string; merchantNo: string; platform: FakePlatform }>;
  queues: MerchantQueues;
  /** The worker runner now (a new one after {@link TwoMerchants.restartWorker}). */
  worker(): WorkerRunner;
  restartWorker(): Promise<void>;
  /** `n` pay-ins of merchant `ref`, registered, released at its platform and put in its queue; their order numbers. */
  enqueuePayins(ref: 'a' | 'b', n: number): Promise<string[]>;
  /** Merchant `ref`'s credits (ledger entries), those after `since` only when given. */
  credits(ref: 'a' | 'b', since?: Date): Promise<number>;
  close(): Promise<void>;
}

const MERCHANT_NOS = { a: 'M-TWO-A-0001', b: 'M-TWO-B-0002' } as const;

export async function startTwoMerchants(env: TestEnv, opts: TwoMerchantsOptions = {}): Promise<TwoMerchants> {
  const logger = createLogger({ name: 'two-merchants', level: 'silent' });
  const refs = ['a', 'b'] as const;
  const platforms = {} as Record<'a' | 'b', FakePlatform>;
  for (const ref of refs) platforms[ref] = await startFakePlatform({ merchantNo: MERCHANT_NOS[ref] });
  const file = writeMerchantsFile(
    refs.map((ref) => ({
      ref,
      merchantNo: MERCHANT_NOS[ref],
      platformBaseUrl: platforms[ref].url,
      ...opts.entries?.[ref],
    })),
  );
  const shared = {
    MERCHANTS_FILE: file.path,
    PLATFORM_ALLOW_HTTP: 'true',
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: env.redisUrl,
    QUEUE_PREFIX: env.prefix,
    LOG_LEVEL: 'silent',
  };
  const workerConfig: Config = loadConfig(
    { ...shared, WORKER_METRICS_PORT: '0', WORKER_CONCURRENCY: '4', ...opts.workerEnv },
    'worker',
  );
  const consoleConfig = loadConfig(
    {
      ...shared,
      CONSOLE_TOKEN: TOKEN,
      CONSOLE_SESSION_SECRET: 'test-console-session-secret-0123456789abcdef',
      ...AUTH_LIMITS_OFF,
    },
    'console',
  );
  const clients = new Map<string, PlatformClient>(
    consoleConfig.merchants.map((m) => [
      m.ref,
      createPlatformClient({ baseUrl: m.platformBaseUrl!, merchantNo: m.merchantNo, timeoutMs: 2000 }),
    ]),
  );
  const redis: Redis = createRedis(env.redisUrl, 'producer');
  const queues = merchantQueues(
    consoleConfig.merchants,
    env.prefix,
    (name, prefix) => new Queue(name, { connection: redis, prefix }),
  );
  const app = await buildApp({
    config: consoleConfig,
    db: env.db,
    platform: clients.get('a')!,
    platforms: clients,
    logger,
    redis,
    queues,
    operators: OPERATORS,
    replayDriver: false,
    ...opts.consoleDeps,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  let worker = await runWorker({ config: workerConfig, logger });

  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    app,
    merchants: {
      a: { ref: 'a', merchantNo: MERCHANT_NOS.a, platform: platforms.a },
      b: { ref: 'b', merchantNo: MERCHANT_NOS.b, platform: platforms.b },
    },
    queues,
    worker: () => worker,
    async restartWorker() {
      await worker.stop();
      worker = await runWorker({ config: workerConfig, logger });
    },
    async enqueuePayins(ref, n) {
      const merchantNo = MERCHANT_NOS[ref];
      const nos: string[] = [];
      for (let i = 0; i < n; i++) {
        const merchantOrderNo = `${ref.toUpperCase()}-${uid()}`;
        await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '10', merchantNo });
        platforms[ref].setOrder(
          platformOrder({
            orderNo: `P${merchantOrderNo}`,
            merchantNo,
            merchantOrderNo,
            type: 'payin',
            state: 6,
            amountJson: '10',
          }),
        );
        nos.push(merchantOrderNo);
      }
      await queues.of(ref).queue.addBulk(
        nos.map((no) => ({
          name: 'payin',
          data: { ...payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10' }), merchantNo },
          opts: { ...callbackJobOptions, jobId: callbackJobId('payin', `P${no}`, 6) },
        })),
      );
      return nos;
    },
    async credits(ref, since) {
      const [row] = await env.db.db
        .select({ n: count() })
        .from(ledgerEntries)
        .where(
          and(eq(ledgerEntries.merchantNo, MERCHANT_NOS[ref]), since ? gt(ledgerEntries.createdAt, since) : undefined),
        );
      return row!.n;
    },
    async close() {
      await worker?.stop();
      await app.close();
      await Promise.all(queues.list.map((q) => q.queue.close()));
      await Promise.all([...clients.values()].map((c) => c.close()));
      redis.disconnect();
      await Promise.all(refs.map((ref) => platforms[ref].close()));
      file.remove();
    },
  };
}
