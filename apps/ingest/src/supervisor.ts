/**
 * The cluster supervisor (INGEST_WORKERS > 1, or 0 = one per core): runs the start-up checks once, forks the
 * workers that share the public port (RSA decryption is the main cost), restarts a worker that dies (and gives up
 * when they keep dying), serves the aggregated metrics on the ops listener, and stops the workers on SIGTERM.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import type { Config } from '@mcb/core/config';
import { forceBudgetMs, type Releasers } from '@mcb/core/lifecycle';
import type { Logger } from '@mcb/core/logger';
import { startMetricsServer } from '@mcb/core/metrics';
import { preflight } from './startup.ts';

/**
 * Stop a worker: SIGTERM, and SIGKILL if it has not exited once `graceMs` have passed. Each worker bounds its own
 * stop by INGEST_SHUTDOWN_TIMEOUT too; the primary's bound (the same) forces this kill before it exits.
 */
function stopWorker(w: Worker, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (w.isDead()) return resolve();
    const timer = setTimeout(() => w.process.kill('SIGKILL'), graceMs);
    w.once('exit', () => (clearTimeout(timer), resolve()));
    w.process.kill('SIGTERM');
  });
}

const liveWorkers = (): Worker[] => Object.values(cluster.workers ?? {}).flatMap((w) => (w && !w.isDead() ? [w] : []));

/** Run the supervisor in the primary; its resources are released through `releasers`. */
export async function runSupervisor(
  config: Config,
  logger: Logger,
  workers: number,
  releasers: Releasers,
): Promise<void> {
  await preflight(config, logger);
  const aggregator = new AggregatorRegistry();
  const metricsServer = await startMetricsServer({
    host: config.INGEST_METRICS_HOST,
    port: config.INGEST_METRICS_PORT,
    logger,
    source: async () => ({ contentType: aggregator.contentType, body: await aggregator.clusterMetrics() }),
  });
  releasers.add('metrics server', () => metricsServer.close());

  let stopping = false;
  const recentExits: number[] = [];
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    const now = Date.now();
    recentExits.push(now);
    while (recentExits.length && now - (recentExits[0] ?? now) > 60_000) recentExits.shift();
    logger.error({ pid: worker.process.pid, code, signal }, 'ingest worker exited');
    if (recentExits.length > workers * 3) {
      logger.fatal('ingest workers keep exiting; giving up');
      void releasers.shutdown('workers keep exiting', 1);
      return;
    }
    setTimeout(() => cluster.fork(), 1000);
  });
  // Released first (added last): stop the workers, each finishing its in-flight callbacks within the bound; forced
  // (the primary's own bound reached), any worker still alive is killed.
  const graceMs = config.INGEST_SHUTDOWN_TIMEOUT - forceBudgetMs(config.INGEST_SHUTDOWN_TIMEOUT);
  releasers.add(
    'workers',
    async () => {
      stopping = true;
      await Promise.all(liveWorkers().map((w) => stopWorker(w, graceMs)));
    },
    () => {
      for (const w of liveWorkers()) w.process.kill('SIGKILL');
    },
  );
  for (let i = 0; i < workers; i++) cluster.fork();
  logger.info({ workers, metricsPort: metricsServer.port }, 'ingest supervisor started');
}
