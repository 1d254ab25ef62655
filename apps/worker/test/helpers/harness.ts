import { createDb, type Db } from '@mcb/core/db';
import { createLogger, type Logger } from '@mcb/core/logger';
import { createMetricsRegistry } from '@mcb/core/metrics';
import {
  createPlatformClient,
  guardPlatform,
  type PlatformClient,
  type PlatformGuardOptions,
} from '@mcb/core/platform';
import { callbackJobId, callbackJobOptions, CALLBACKS_QUEUE, type CallbackJobInput } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import { MERCHANT_NO, waitFor, type TestEnv } from '@mcb/testkit';
import { Queue, type Job } from 'bullmq';
import { createCallbackWorker, type CallbackWorker, type CallbackWorkerDeps } from '../../src/callback-worker.ts';
import { createWorkerMetrics, type WorkerMetrics } from '../../src/metrics.ts';

/** Options of {@link startHarness}: worker settings tests tune so retries take milliseconds. */
export interface HarnessOptions extends Partial<Omit<CallbackWorkerDeps, 'db' | 'platform' | 'logger' | 'connection'>> {
  /** Worker instances, each with its own Redis connection and Postgres pool. @defaultValue 1 */
  instances?: number;
  /** Postgres URL of the workers (a proxy's, to cut them off). @defaultValue env.databaseUrl */
  workerDatabaseUrl?: string;
  /** Timeout of a Get order call. @defaultValue 2000 */
  platformTimeoutMs?: number;
  /** Where the workers log (a test reads the lines back). @defaultValue silent, or TEST_LOG_LEVEL */
  logger?: Logger;
  /** Put Get order behind the worker's flow control (rate cap, circuit breaker), as main.ts does. @defaultValue none */
  platformGuard?: PlatformGuardOptions;
}

/** Queue, workers and their clients for one test; `close()` releases all of it. */
export interface Harness {
  queue: Queue<CallbackJobInput>;
  workers: CallbackWorker[];
  platform: PlatformClient;
  metrics: WorkerMetrics;
  logger: Logger;
  /** Enqueue an event as ingest does; `jobId` defaults to the contract's id. */
  add(event: CallbackJobInput, jobId?: string): Promise<Job<CallbackJobInput>>;
  /** Wait until the job is completed or failed, and return it. */
  settled(jobId: string, timeoutMs?: number): Promise<Job<CallbackJobInput>>;
  close(): Promise<void>;
}

export async function startHarness(env: TestEnv, platformUrl: string, options: HarnessOptions = {}): Promise<Harness> {
  const logger =
    options.logger ??
    createLogger({ name: 'worker-test', level: (process.env.TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent' });
  const { platformGuard, ...workerOptions } = options;
  const direct = createPlatformClient({
    baseUrl: platformUrl,
    merchantNo: MERCHANT_NO,
    timeoutMs: options.platformTimeoutMs ?? 2000,
  });
  const platform = platformGuard ? guardPlatform(direct, platformGuard) : direct;
  const metrics = createWorkerMetrics(createMetricsRegistry('worker-test'));
  const queueConnection = createRedis(env.redisUrl, 'worker');
  const queue = new Queue<CallbackJobInput>(CALLBACKS_QUEUE, { connection: queueConnection, prefix: env.prefix });
  const connections: Redis[] = [queueConnection];
  const pools: Db[] = [];
  const workers: CallbackWorker[] = [];
  for (let i = 0; i < (options.instances ?? 1); i++) {
    const connection = createRedis(env.redisUrl, 'worker');
    const pool = createDb(options.workerDatabaseUrl ?? env.databaseUrl, { max: 4, connectionTimeoutMs: 1000 });
    connections.push(connection);
    pools.push(pool);
    workers.push(
      createCallbackWorker({
        concurrency: 4,
        backoff: { baseMs: 20, capMs: 200 },
        // Tests read a settled job's return value, reviews included; release-on-review has its own test.
        releaseReviewedJobIds: false,
        ...workerOptions,
        connection,
        name: `worker-${i}`,
        prefix: env.prefix,
        db: pool.db,
        platform,
        logger,
        metrics,
      }),
    );
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));

  return {
    queue,
    workers,
    platform,
    metrics,
    logger,
    add: (event, jobId) =>
      queue.add(event.kind, event, {
        ...callbackJobOptions,
        jobId: jobId ?? callbackJobId(event.kind, event.orderNo, event.state),
      }),
    async settled(jobId, timeoutMs = 15_000) {
      return waitFor(
        async () => {
          const job = await queue.getJob(jobId);
          if (!job) return undefined;
          return job.finishedOn ? job : undefined;
        },
        { timeoutMs, message: `job ${jobId} did not finish` },
      );
    },
    async close() {
      await Promise.all(workers.map((w) => w.close()));
      await queue.close();
      await Promise.all(pools.map((p) => p.close()));
      await Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())));
      await platform.close();
    },
  };
}
