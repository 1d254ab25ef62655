import { loadConfig } from '@mcb/core/config';
import { createLogger, type Logger } from '@mcb/core/logger';
import type { PlatformClient, PlatformGuardOptions } from '@mcb/core/platform';
import { callbackJobId, callbackJobOptions, CALLBACKS_QUEUE, type CallbackJobInput } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import {
  runWorker,
  type AdaptiveLimit,
  type Alerter,
  type CallbackWorker,
  type CallbackWorkerDeps,
  type WorkerMetrics,
  type WorkerRunner,
} from '@mcb/worker';
import { Queue, type Job } from 'bullmq';
import { MERCHANT_NO } from './fixtures.ts';
import type { TestEnv } from './index.ts';
import { waitFor } from './wait-for.ts';

/** Options of {@link startHarness}: worker settings tests tune so retries take milliseconds. */
export interface HarnessOptions extends Pick<
  Partial<CallbackWorkerDeps>,
  | 'backoff'
  | 'circuitRedelayMs'
  | 'circuitWaitBoundMs'
  | 'releaseReviewedJobIds'
  | 'failedRowsCheckMs'
  | 'allLoopsFrom'
  | 'arrivals'
  | 'afterCommit'
  | 'orderGracePeriodMs'
  | 'confirmMaxWaitMs'
  | 'maxUnknownWaiting'
  | 'commitBatch'
  | 'lockDurationMs'
  | 'stalledIntervalMs'
> {
  /** Worker processes (runners), each with its own Redis connection and Postgres pool. @defaultValue 1 */
  instances?: number;
  /** Jobs in flight per runner, pinned (WORKER_CONCURRENCY), unless `adaptive` is given. @defaultValue 4 */
  concurrency?: number;
  /** The adaptive limit of the runner's jobs in flight, made by the test to watch it. @defaultValue none (pinned) */
  adaptive?: AdaptiveLimit;
  /** Where alerts go. @defaultValue ALERT_WEBHOOK_URL unset: logged only */
  alerts?: Alerter;
  /** Postgres URL of the workers (a proxy's, to cut them off). @defaultValue env.databaseUrl */
  workerDatabaseUrl?: string;
  /** Timeout of a Get order call. @defaultValue 2000 */
  platformTimeoutMs?: number;
  /** Where the workers log (a test reads the lines back). @defaultValue silent, or TEST_LOG_LEVEL */
  logger?: Logger;
  /**
   * The Get order guard's rate cap (the fleet's PLATFORM_MAX_RPS) and breaker. @defaultValue no cap, and a breaker
   * that never opens (the guard lets every failure through, as a platform without one would)
   */
  platformGuard?: Pick<PlatformGuardOptions, 'maxRps' | 'failuresToOpen' | 'openMs' | 'maxWaitMs'> &
    /** Ignored when `adaptive` is given: the runner feeds it as main.ts does. */
    Pick<PlatformGuardOptions, 'onSample' | 'onStateChange'>;
}

/** The metrics the tests read: one runner's, or every runner's added up (a test with several instances). */
export type HarnessMetrics = { [K in keyof WorkerMetrics]: Pick<WorkerMetrics[K], 'get'> };

/** Queue, runners and their clients for one test; `close()` releases all of it. */
export interface Harness {
  queue: Queue<CallbackJobInput>;
  /** Each runner's callback worker (its only lane's). */
  workers: CallbackWorker[];
  runners: WorkerRunner[];
  /** The first runner's Get order client (undefined without runners). */
  platform: PlatformClient | undefined;
  metrics: HarnessMetrics;
  logger: Logger;
  /** Enqueue an event as ingest does; `jobId` defaults to the contract's id. */
  add(event: CallbackJobInput, jobId?: string): Promise<Job<CallbackJobInput>>;
  /** Wait until the job is completed or failed, and return it. */
  settled(jobId: string, timeoutMs?: number): Promise<Job<CallbackJobInput>>;
  close(): Promise<void>;
}

/** The worker's settings of a test, as the environment a worker process would read. */
function harnessEnv(env: TestEnv, platformUrl: string, o: HarnessOptions): Record<string, string> {
  const ms = (v: number | undefined) => (v === undefined ? undefined : `${v}ms`);
  const values: Record<string, string | undefined> = {
    MERCHANT_NO,
    PLATFORM_BASE_URL: platformUrl,
    PLATFORM_ALLOW_HTTP: 'true',
    PLATFORM_TIMEOUT: ms(o.platformTimeoutMs ?? 2000),
    PLATFORM_MAX_RPS: String(o.platformGuard?.maxRps ?? 0),
    DATABASE_URL: o.workerDatabaseUrl ?? env.databaseUrl,
    REDIS_URL: env.redisUrl,
    QUEUE_PREFIX: env.prefix,
    // With an adaptive limit the platform's pool is sized for its ceiling, as in production.
    WORKER_CONCURRENCY: o.adaptive ? undefined : String(o.concurrency ?? 4),
    WORKER_DB_POOL: '4',
    WORKER_METRICS_PORT: '0',
    WORKER_COMMIT_BATCH: o.commitBatch === undefined ? undefined : String(o.commitBatch),
    WORKER_MAX_UNKNOWN_WAITING: o.maxUnknownWaiting === undefined ? undefined : String(o.maxUnknownWaiting),
    WORKER_LOCK_DURATION: ms(o.lockDurationMs),
    WORKER_STALLED_INTERVAL: ms(o.stalledIntervalMs),
    ORDER_GRACE_PERIOD: ms(o.orderGracePeriodMs),
    CONFIRM_MAX_WAIT: ms(o.confirmMaxWaitMs),
    LOG_LEVEL: 'silent',
  };
  return Object.fromEntries(Object.entries(values).filter((e): e is [string, string] => e[1] !== undefined));
}

export async function startHarness(env: TestEnv, platformUrl: string, options: HarnessOptions = {}): Promise<Harness> {
  const logger =
    options.logger ??
    createLogger({ name: 'worker-test', level: (process.env.TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent' });
  const config = loadConfig(harnessEnv(env, platformUrl, options), 'worker');
  const { platformGuard, adaptive } = options;
  const queueConnection = createRedis(env.redisUrl, 'worker');
  const queue = new Queue<CallbackJobInput>(CALLBACKS_QUEUE, { connection: queueConnection, prefix: env.prefix });
  const runners: WorkerRunner[] = [];
  const close = async () => {
    await Promise.all(runners.map((r) => r.stop()));
    await queue.close();
    await queueConnection.quit().catch(() => queueConnection.disconnect());
  };
  try {
    for (let i = 0; i < (options.instances ?? 1); i++) {
      runners.push(
        await runWorker({
          config,
          logger,
          name: `worker-${i}`,
          tuning: {
            callbacks: {
              backoff: { baseMs: 20, capMs: 200 },
              // Tests read a settled job's return value, reviews included; release-on-review has its own test.
              releaseReviewedJobIds: false,
              ...pick(options, CALLBACK_KNOBS),
            },
            guard: {
              failuresToOpen: platformGuard?.failuresToOpen ?? Number.MAX_SAFE_INTEGER,
              openMs: platformGuard?.openMs,
              maxWaitMs: platformGuard?.maxWaitMs,
            },
            // Each runner spaces its own Get orders and keeps its own breaker (a file's harnesses share its prefix).
            fleet: false,
            adaptive: adaptive && (() => adaptive),
            alerts: options.alerts,
            dbConnectionTimeoutMs: 1000,
          },
        }),
      );
    }
  } catch (e) {
    await close();
    throw e;
  }
  const lanes = runners.map((r) => r.lane());
  return {
    queue,
    workers: lanes.map((l) => l.callbacks),
    runners,
    platform: lanes[0]?.platform,
    metrics: summed(lanes.map((l) => l.metrics)),
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
    close,
  };
}

/** The callback worker's knobs a test may set, handed to the runners as they are. */
const CALLBACK_KNOBS = [
  'backoff',
  'circuitRedelayMs',
  'circuitWaitBoundMs',
  'releaseReviewedJobIds',
  'failedRowsCheckMs',
  'allLoopsFrom',
  'arrivals',
  'afterCommit',
] as const;

function pick<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Partial<Pick<T, K>> {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) as Partial<Pick<T, K>>;
}

type Value = { value: number; labels: object; metricName?: string };

/** One runner's metrics, or every runner's series added up by their labels. */
function summed(all: WorkerMetrics[]): HarnessMetrics {
  if (all.length === 1) return all[0]!;
  const keys = Object.keys(all[0] ?? {}) as (keyof WorkerMetrics)[];
  return Object.fromEntries(
    keys.map((k) => [
      k,
      {
        async get() {
          const parts = await Promise.all(all.map((m) => m[k].get()));
          const byLabels = new Map<string, Value>();
          for (const v of parts.flatMap((p): Value[] => p.values)) {
            const key = `${v.metricName ?? ''}${JSON.stringify(v.labels)}`;
            const seen = byLabels.get(key);
            byLabels.set(key, seen ? { ...seen, value: seen.value + v.value } : { ...v });
          }
          return { ...parts[0]!, values: [...byLabels.values()] };
        },
      },
    ]),
  ) as unknown as HarnessMetrics;
}
