/** Launch `apps/ingest/src/main.ts` as production runs it, on free ports, against the benchmark's Redis. */
import { fileURLToPath } from 'node:url';
import { BENCH_MERCHANT_NO } from './callbacks.ts';
import { freePort, launch, waitForHttp, type Child } from './proc.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface IngestProcess {
  child: Child;
  port: number;
  host: string;
  /** Its /metrics (with several processes, the cluster's aggregate). */
  metricsUrl: string;
}

export async function startIngest(opts: {
  redisUrl: string;
  privateKeyFile: string;
  /** INGEST_WORKERS: 1 = one process, 0 = one per core. */
  workers: number;
  logLevel: string;
  prefix?: string;
  nodeArgs?: string[];
  /** More environment (or overrides), e.g. a setting the bench tries. */
  env?: Record<string, string>;
}): Promise<IngestProcess> {
  const port = await freePort();
  const metricsPort = await freePort();
  const child = launch({
    name: `ingest (INGEST_WORKERS=${opts.workers})`,
    args: ['apps/ingest/src/main.ts'],
    cwd: REPO_ROOT,
    nodeArgs: opts.nodeArgs,
    env: {
      INGEST_HOST: '127.0.0.1',
      INGEST_PORT: String(port),
      INGEST_METRICS_PORT: String(metricsPort),
      INGEST_WORKERS: String(opts.workers),
      REDIS_URL: opts.redisUrl,
      QUEUE_PREFIX: opts.prefix ?? 'mcb',
      MERCHANT_NO: BENCH_MERCHANT_NO,
      MERCHANT_PRIVATE_KEY_FILE: opts.privateKeyFile,
      LOG_LEVEL: opts.logLevel,
      ...opts.env,
    },
  });
  // Readiness means Redis answered and was found durable (AOF always); with several workers any one answers.
  await waitForHttp(child, `http://127.0.0.1:${port}/readyz`, 60_000);
  if (opts.workers !== 1) {
    // Each cluster worker starts on its own; give them all time to listen before measuring.
    await waitForHttp(child, `http://127.0.0.1:${metricsPort}/metrics`, 30_000);
  }
  return { child, port, host: '127.0.0.1', metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` };
}
