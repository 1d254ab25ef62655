import { refreshCatalog } from '@mcb/core/catalog';
import { coerceError, ErrorCodes, isAppError } from '@mcb/core/errors';
import type { Merchant } from '@mcb/core/config';
import { MaintenanceJobs, merchantKeys } from '@mcb/core/queue';
import { createLogThrottle } from '@mcb/core/logger';
import type { RedisClient, RedisHealth } from '@mcb/core/redis';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import { runSweep, type SweepDeps, type SweepReport } from '@mcb/settlement';

/** What {@link createMaintenanceWorker} needs. */
export interface MaintenanceWorkerDeps extends SweepDeps {
  /**
   * A `worker`-role Redis connection; the caller closes it after the worker. Also holds the sweep lock when `redis`
   * is it.
   */
  connection: RedisClient;
  /**
   * Where the worker's and its queue's errors are logged; without it, here, at most one line per 10 s each.
   * @defaultValue none
   */
  redisHealth?: RedisHealth;
  /** BullMQ key prefix (QUEUE_PREFIX); the merchant's queue is named under it (`merchantKeys`). @defaultValue 'mcb' */
  prefix?: string;
  /**
   * The lane's merchant: whose maintenance queue (`merchantKeys(prefix, ref).maintenanceQueue`) this worker runs; its
   * sweep looks only at `merchantNo`'s orders. @defaultValue the `default` merchant's queue
   */
  merchant?: Pick<Merchant, 'ref'>;
  /** Interval of the reconciliation sweep (RECONCILE_INTERVAL), in ms. @defaultValue 300000 */
  reconcileEveryMs?: number;
  /** Whose catalog snapshots the refresh writes (`catalogScopeOf` the lane's merchant). @defaultValue '' (legacy) */
  catalogScope?: string;
  /** Interval of the catalog refresh (CATALOG_REFRESH_INTERVAL), in ms. @defaultValue 900000 */
  catalogRefreshEveryMs?: number;
  /** This instance's name, recorded on each job as `processedBy`. */
  name?: string;
}

/** The maintenance queue's worker and its queue (for the schedulers). `close()` stops a running sweep first. */
export interface MaintenanceWorker {
  worker: Worker;
  queue: Queue;
  close(): Promise<void>;
}

/** What a maintenance job returns: the sweep's report, a skip, or the refreshed catalog's summary. */
export type MaintenanceResult =
  SweepReport | { skipped: 'sweep-in-progress' | 'merchant-paused' } | { fetchedAt: string; currencies: number };

/** Jobs of a scheduler are kept for a look on the dashboard; the next interval is the retry, so one attempt each. */
const templateOpts = { attempts: 1, removeOnComplete: { count: 200 }, removeOnFail: { count: 500 } };

/**
 * The `maintenance` queue: two BullMQ job schedulers (upserted by every worker process; the same ids make it one
 * schedule) and a Worker with concurrency 1 in each process. A scheduler makes its next job when the current one
 * starts, so sweeps do not pile up; the Redis lock in {@link runSweep} keeps a second sweep (a slow one overrunning
 * its interval, or a manual one from the console) from running at the same time: the later one is skipped.
 */
export async function createMaintenanceWorker(deps: MaintenanceWorkerDeps): Promise<MaintenanceWorker> {
  const { logger } = deps;
  const keys = merchantKeys(deps.prefix ?? 'mcb', deps.merchant?.ref);
  const prefix = keys.prefix;
  const queue = new Queue(keys.maintenanceQueue, { connection: deps.connection, prefix });
  // Aborts a running sweep on close, so shutdown does not wait for thousands of Get order calls.
  const closing = new AbortController();

  const worker = new Worker(keys.maintenanceQueue, maintenanceProcessor(deps, closing.signal), {
    connection: deps.connection,
    prefix,
    name: deps.name,
    concurrency: 1,
    // One re-run if the process dies mid-job; the lock expires meanwhile, so the re-run may sweep.
    maxStalledCount: 1,
  });
  // Without listeners BullMQ writes each error to stderr as a raw trace: while Redis is down, several a second.
  const logThrottled = createLogThrottle(logger);
  const onError = (source: string) => (e: Error) =>
    deps.redisHealth
      ? deps.redisHealth.report(source, e)
      : void logThrottled(source, 'error', { err: coerceError(e) }, `${source} error`);
  worker.on('error', onError('maintenance worker'));
  queue.on('error', onError('maintenance queue'));

  // A Redis that refuses writes for a moment (NOREPLICAS while a replica resyncs, READONLY during a failover, OOM)
  // must not keep the worker from starting: callbacks matter more than the schedules.
  await writeSchedules(queue, deps, closing.signal, onError('maintenance schedulers'));

  return {
    worker,
    queue,
    async close() {
      closing.abort(new Error('worker shutting down'));
      await worker.close();
      await queue.close();
    },
  };
}

/** Runs a maintenance job: a sweep or a catalog refresh, stopped early when the worker closes (`closing`). */
function maintenanceProcessor(deps: MaintenanceWorkerDeps, closing: AbortSignal) {
  return async (job: Job, _token?: string, signal?: AbortSignal): Promise<MaintenanceResult> => {
    const stop = signal ? AbortSignal.any([signal, closing]) : closing;
    if (job.name === MaintenanceJobs.reconcile) return reconcile(deps, job, stop);
    if (job.name === MaintenanceJobs.catalogRefresh) return refresh(deps, stop);
    throw new UnrecoverableError(`unknown maintenance job ${job.name}`);
  };
}

/** A scheduled catalog refresh. Never fatal: the stored copy stays, the next interval tries again. */
async function refresh(deps: MaintenanceWorkerDeps, stop: AbortSignal): Promise<MaintenanceResult> {
  const { logger } = deps;
  try {
    const fresh = await refreshCatalog(
      { db: deps.db, platform: deps.platform, logger, merchantScope: deps.catalogScope },
      { signal: stop },
    );
    logger.info({ currencies: fresh.currencies }, 'catalog refreshed');
    return { fetchedAt: fresh.fetchedAt.toISOString(), currencies: fresh.currencies };
  } catch (e) {
    const err = coerceError(e);
    logger.warn(
      { err, code: isAppError(err) ? err.code : undefined },
      `catalog refresh failed; next try in one interval: ${err.message}`,
    );
    throw err;
  }
}

/** A scheduled sweep; skipped when another one holds the lock. */
async function reconcile(deps: MaintenanceWorkerDeps, job: Job, stop: AbortSignal): Promise<MaintenanceResult> {
  try {
    return await runSweep(deps, { trigger: 'schedule', signal: stop });
  } catch (e) {
    if (isAppError(e, ErrorCodes.RECONCILE_IN_PROGRESS)) {
      deps.logger.info({ jobId: job.id }, 'reconciliation skipped: another sweep is running');
      return { skipped: 'sweep-in-progress' };
    }
    if (isAppError(e, ErrorCodes.MERCHANT_PAUSED)) {
      deps.logger.info({ jobId: job.id }, 'reconciliation skipped: the merchant is paused');
      return { skipped: 'merchant-paused' };
    }
    // Only the lock's Redis calls get here (the sweep reports everything else); the next interval tries again.
    deps.logger.error({ err: coerceError(e), jobId: job.id }, 'reconciliation could not start');
    throw e;
  }
}

/**
 * Upsert the two job schedulers. The first try is awaited; after a failure (reported to `onError`) they are written
 * in the background, with a growing pause, once Redis takes them, until `closing` aborts.
 */
async function writeSchedules(
  queue: Queue,
  deps: MaintenanceWorkerDeps,
  closing: AbortSignal,
  onError: (e: Error) => void,
): Promise<void> {
  const upsertSchedulers = async () => {
    await queue.upsertJobScheduler(
      MaintenanceJobs.reconcile,
      { every: deps.reconcileEveryMs ?? 300_000 },
      { name: MaintenanceJobs.reconcile, data: {}, opts: templateOpts },
    );
    await queue.upsertJobScheduler(
      MaintenanceJobs.catalogRefresh,
      { every: deps.catalogRefreshEveryMs ?? 900_000 },
      { name: MaintenanceJobs.catalogRefresh, data: {}, opts: templateOpts },
    );
  };
  try {
    await upsertSchedulers();
  } catch (first) {
    onError(coerceError(first));
    void (async () => {
      for (let attempt = 1; !closing.aborted; attempt++) {
        await new Promise((r) => setTimeout(r, Math.min(30_000, 250 * 2 ** attempt)).unref());
        if (closing.aborted) return;
        try {
          await upsertSchedulers();
          deps.logger.info({ attempts: attempt + 1 }, 'maintenance schedules written');
          return;
        } catch (e) {
          onError(coerceError(e));
        }
      }
    })();
  }
}
