/** Launch `apps/worker/src/main.ts` as production runs it, against the benchmark's Redis, database and platform. */
import { BENCH_MERCHANT_NO } from './callbacks.ts';
import { REPO_ROOT } from './ingest-process.ts';
import { freePort, launch, waitForHttp, type Child } from './proc.ts';

export async function startWorker(opts: {
  redisUrl: string;
  databaseUrl: string;
  platformUrl: string;
  concurrency?: number;
  logLevel: string;
  nodeArgs?: string[];
  env?: Record<string, string>;
  /** MERCHANT_NO of its one merchant. @defaultValue BENCH_MERCHANT_NO */
  merchantNo?: string;
  /** A MERCHANTS_FILE instead of MERCHANT_NO: a lane per merchant. @defaultValue none */
  merchantsFile?: string;
}): Promise<Child & { metricsUrl: string }> {
  const metricsPort = await freePort();
  const child = launch({
    name: 'worker',
    args: ['apps/worker/src/main.ts'],
    cwd: REPO_ROOT,
    nodeArgs: opts.nodeArgs,
    env: {
      REDIS_URL: opts.redisUrl,
      DATABASE_URL: opts.databaseUrl,
      QUEUE_PREFIX: 'mcb',
      ...(opts.merchantsFile
        ? { MERCHANTS_FILE: opts.merchantsFile }
        : { MERCHANT_NO: opts.merchantNo ?? BENCH_MERCHANT_NO }),
      PLATFORM_BASE_URL: opts.platformUrl,
      ...(opts.concurrency ? { WORKER_CONCURRENCY: String(opts.concurrency) } : {}),
      PLATFORM_ALLOW_HTTP: 'true',
      WORKER_METRICS_PORT: String(metricsPort),
      LOG_LEVEL: opts.logLevel,
      ...opts.env,
    },
  });
  await waitForHttp(child, `http://127.0.0.1:${metricsPort}/healthz`, 60_000);
  return Object.assign(child, { metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` });
}
