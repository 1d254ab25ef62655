import { catalogScopeOf } from '@mcb/core/catalog';
import { DEFAULT_MERCHANT_REF, type Config, type Merchant } from '@mcb/core/config';
import type { Database } from '@mcb/core/db';
import type { Releasers } from '@mcb/core/lifecycle';
import type { Logger } from '@mcb/core/logger';
import { registerQueueDepthGauge, Registry } from '@mcb/core/metrics';
import {
  createFleet,
  createPlatformClientFromConfig,
  guardPlatform,
  type Fleet,
  type GuardedPlatformClient,
  type PlatformGuardOptions,
} from '@mcb/core/platform';
import { merchantKeys, type MerchantKeys } from '@mcb/core/queue';
import type { RedisClient, RedisHealth } from '@mcb/core/redis';
import { createReconcileMetrics, sweepSettingsFromConfig } from '@mcb/settlement';
import { Queue } from 'bullmq';
import { createAdaptiveLimit, type AdaptiveLimit } from './adaptive-concurrency.ts';
import { alertOnReviewOpened, type Alerter } from './alerts.ts';
import {
  createCallbackWorker,
  MERCHANT_PAUSED_HOLDER,
  type CallbackWorker,
  type CallbackWorkerDeps,
} from './callback-worker.ts';
import { forcedClose } from './jobs-in-progress.ts';
import { createLaneGovernor, type LaneGovernor } from './lane-governor.ts';
import { createMaintenanceWorker, type MaintenanceWorker } from './maintenance-worker.ts';
import { createLaneSnapshot } from './lane-snapshot.ts';
import { readPausesByNo, watchMerchantPauses } from './merchant-pause.ts';
import { createWorkerMetrics, type WorkerMetrics } from './metrics.ts';

/** What tests and the bench set beyond the config (never production): hooks, and timings that make retries quick. */
export interface WorkerTuning {
  /** The callback workers' test hooks and timings. @defaultValue none */
  callbacks?: Pick<
    Partial<CallbackWorkerDeps>,
    | 'backoff'
    | 'circuitRedelayMs'
    | 'circuitWaitBoundMs'
    | 'releaseReviewedJobIds'
    | 'failedRowsCheckMs'
    | 'fetchLoops'
    | 'allLoopsFrom'
    | 'arrivals'
    | 'afterCommit'
    | 'maxStalledCount'
  >;
  /** The breaker of each lane's Get order guard. @defaultValue 10 failures open it for 1-30 s, calls wait 30 s */
  guard?: Pick<PlatformGuardOptions, 'failuresToOpen' | 'openMs' | 'maxWaitMs'>;
  /**
   * false: each lane's guard keeps its own Get order rate (PLATFORM_MAX_RPS, spaced in this process) and its own
   * breaker, instead of the fleet's in Redis; for tests whose runners in one file (one queue prefix) must not share a
   * breaker, or that count the rate as one process spaces it. @defaultValue the fleet's
   */
  fleet?: false;
  /** A lane's adaptive limit, made by the test to watch it; undefined: the one the config makes. @defaultValue none */
  adaptive?: (merchant: Merchant) => AdaptiveLimit | undefined;
  /** Where alerts go instead of ALERT_WEBHOOK_URL (a test's own). @defaultValue the config's */
  alerts?: Alerter;
  /** How long a connection to Postgres may take, in ms. @defaultValue 5000 */
  dbConnectionTimeoutMs?: number;
  /** How often merchant_pauses is read, in ms (merchant-pause.ts). @defaultValue 500 */
  pausePollMs?: number;
}

/**
 * One merchant's lane in a worker process: its own queues and workers, jobs in flight, breaker, Get order budget
 * and connection pool (docs/merchants.md).
 */
export interface Lane {
  readonly merchant: Merchant;
  /** Its metrics, every series labelled `merchant` (its ref); the runner serves them beside the process's. */
  readonly registry: Registry;
  /** Every Redis key the merchant owns. */
  readonly keys: MerchantKeys;
  readonly metrics: WorkerMetrics;
  /** Its adaptive jobs in flight; undefined when WORKER_CONCURRENCY pins them. */
  readonly adaptive: AdaptiveLimit | undefined;
  /** Its fleet-wide Get order budget and shared breaker (undefined only with `tuning.fleet` false). */
  readonly fleet: Fleet | undefined;
  /** Get order for this merchant: its base URL, its number, its own connection pool, behind its guard. */
  readonly platform: GuardedPlatformClient;
  /** The callbacks queue's worker (its fetch loops). */
  readonly callbacks: CallbackWorker;
  /** The maintenance queue's worker: this merchant's sweep and catalog refresh. */
  readonly maintenance: MaintenanceWorker;
  /** When the merchant was paused (merchant_pauses, as this process last read it); undefined while it runs. */
  pausedSince(): Date | undefined;
}

/** What {@link createLanes} needs: the process's shared clients and its config. */
export interface LanesDeps {
  config: Config;
  logger: Logger;
  releasers: Releasers;
  registry: Registry;
  redis: RedisClient;
  redisHealth: RedisHealth;
  database: Database;
  alerts: Alerter;
  name?: string;
  tuning?: WorkerTuning;
}

/**
 * The lanes of `config.merchants`, built stage by stage across the merchants so that shutdown (reverse order) stops
 * every lane's fetching together: budgets and platforms, depth queues, callback workers, maintenance workers.
 */
export async function createLanes(deps: LanesDeps): Promise<Lane[]> {
  // The process's lane governor (lane-governor.ts) samples the event loop's delay for the adaptive limits too.
  const loop = { delayMs: () => 0 };
  const links = deps.config.merchants.map((merchant) =>
    laneLink({ ...deps, loopDelayMs: () => loop.delayMs() }, merchant),
  );
  const governor = governLanes(deps, links);
  loop.delayMs = governor.loopDelayMs;
  depthGauges(deps, links);
  // Before any job is taken: a paused merchant's lane is built held (docs/merchants.md "Pausing a merchant").
  const pauses = await readPausesByNo(deps.database);
  const callbacks = links.map((link) => callbackWorker(deps, link, governor, pauses.has(link.merchant.merchantNo)));
  deps.releasers.add(
    'callback worker',
    () => Promise.all(callbacks.map((c) => c.close())),
    allOf(callbacks.map((c) => forcedClose(c, deps.logger))),
  );
  const maintenance = await Promise.all(links.map((link) => maintenanceWorker(deps, link)));
  deps.releasers.add(
    'maintenance worker',
    () => Promise.all(maintenance.map((m) => m.close())),
    allOf(maintenance.map((m) => forcedClose(m.worker, deps.logger))),
  );
  const lanes = links.map((link, i) => ({ ...link, callbacks: callbacks[i]!, maintenance: maintenance[i]! }));
  const watch = watchMerchantPauses({
    database: deps.database,
    redis: deps.redis,
    logger: deps.logger,
    lanes,
    initial: pauses,
    holder: MERCHANT_PAUSED_HOLDER,
    pollMs: deps.tuning?.pausePollMs,
  });
  deps.releasers.add('merchant pauses', () => watch.stop());
  return lanes.map((lane) => ({ ...lane, pausedSince: () => watch.pauseOf(lane.merchant.ref)?.since }));
}

/** A lane's link to the platform: its keys, metrics, adaptive limit, fleet budget and guarded Get order. */
type LaneLink = Omit<Lane, 'callbacks' | 'maintenance' | 'pausedSince'> & { logger: Logger };

function laneLink(deps: LanesDeps & { loopDelayMs: () => number }, merchant: Merchant): LaneLink {
  const { config, releasers } = deps;
  const logger = deps.logger.child({ merchant: merchant.ref });
  const keys = merchantKeys(config.QUEUE_PREFIX, merchant.ref);
  // The lane's own registry, its series labelled with the merchant's ref (a configured one, never a caller's guess).
  const registry = new Registry();
  registry.setDefaultLabels({ app: 'worker', merchant: merchant.ref });
  const metrics = createWorkerMetrics(registry);
  const named = (what: string) => (merchant.ref === DEFAULT_MERCHANT_REF ? what : `${what} ${merchant.ref}`);
  const maxRps = merchant.getOrderRps ?? config.PLATFORM_MAX_RPS;
  // Jobs in flight: pinned by WORKER_CONCURRENCY, or adapted to Get order's latency and failures (docs/worker.md).
  const adaptive =
    deps.tuning?.adaptive?.(merchant) ??
    (config.WORKER_CONCURRENCY === undefined
      ? createAdaptiveLimit({ max: config.WORKER_MAX_IN_FLIGHT, maxRps, loopDelayMs: deps.loopDelayMs })
      : undefined);
  // The merchant's Get order budget (shared by every worker and the console) and breaker state, on the queue's Redis
  // connection under the merchant's keys (docs/deployment.md "Sizing").
  const fleet =
    deps.tuning?.fleet === false
      ? undefined
      : createFleet({
          redis: deps.redis,
          keys: keys.fleet,
          scope: merchant.ref,
          maxRps,
          registry,
          logger,
        });
  if (fleet) releasers.add(named('fleet budget'), () => fleet.close());
  // The lane's live figures for the console's merchants page (lane-snapshot.ts), written every few seconds.
  const snapshot = createLaneSnapshot({
    redis: deps.redis,
    key: keys.laneSnapshots,
    breaker: () => platform.breakerState(),
    getOrderRps: maxRps,
    logger,
  });
  releasers.add(named('lane snapshot'), () => snapshot.close());
  // One keep-alive connection per Get order in flight at most, in a pool of the merchant's own; the guard takes Get
  // order's start times from the fleet's budget and pauses Get order while the platform keeps failing, so an outage
  // costs jobs time rather than attempts.
  const platform = guardPlatform(
    createPlatformClientFromConfig(config, {
      merchant,
      connections: config.WORKER_CONCURRENCY ?? config.WORKER_MAX_IN_FLIGHT,
    }),
    {
      ...deps.tuning?.guard,
      fleet,
      maxRps,
      onSample: (sample) => {
        adaptive?.sample(sample);
        snapshot.sample(sample);
      },
      onStateChange: (state) => {
        adaptive?.paused(state === 'open');
        metrics.platformCircuitOpen.set(state === 'closed' ? 0 : 1);
        logger[state === 'closed' ? 'info' : 'warn']({ state }, `platform circuit breaker ${state}`);
      },
    },
  );
  releasers.add(named('platform'), () => platform.close());
  return { merchant, registry, keys, metrics, adaptive, fleet, platform, logger };
}

/** Queue depth by state for Prometheus, read at scrape time: each lane's callbacks and maintenance queues. */
function depthGauges(deps: LanesDeps, links: readonly LaneLink[]): void {
  const queues = links.flatMap(({ keys, registry }) => {
    const own = [keys.callbacksQueue, keys.maintenanceQueue].map(
      (name) => new Queue(name, { connection: deps.redis, prefix: keys.prefix }),
    );
    for (const q of own) deps.redisHealth.listen(q, `${q.name} depth queue`);
    registerQueueDepthGauge(registry, own);
    return own;
  });
  deps.releasers.add('depth queues', () => Promise.all(queues.map((q) => q.close())));
}

/**
 * The governor that holds a lane taking more than its weighted share while lanes compete for the process. The lanes
 * of a process whose jobs in flight are pinned (WORKER_CONCURRENCY) are not held.
 */
function governLanes(deps: LanesDeps, links: readonly LaneLink[]): LaneGovernor {
  const governor = createLaneGovernor({
    lanes: links.flatMap(({ merchant, adaptive }) =>
      adaptive
        ? [
            {
              ref: merchant.ref,
              weight: merchant.weight,
              started: () => adaptive.started,
              inFlight: () => adaptive.inFlight,
              limit: () => adaptive.limit,
            },
          ]
        : [],
    ),
  });
  deps.releasers.add('lane governor', async () => governor.stop());
  return governor;
}

/** The lane's callbacks queue worker. */
function callbackWorker(deps: LanesDeps, link: LaneLink, governor: LaneGovernor, paused: boolean): CallbackWorker {
  const { config } = deps;
  return createCallbackWorker({
    ...deps.tuning?.callbacks,
    startPaused: paused,
    cap: () => governor.capOf(link.merchant.ref),
    alerts: deps.alerts,
    connection: deps.redis,
    redisHealth: deps.redisHealth,
    prefix: config.QUEUE_PREFIX,
    merchant: link.merchant,
    // With MERCHANTS_FILE a job carrying another merchant number is not settled on this lane (misrouted-job.ts).
    // Without it there is one merchant and no other lane: its number is checked as before, by ingest and against
    // Get order's answer.
    checkMerchantNo: config.MERCHANTS_FILE !== undefined,
    name: deps.name,
    concurrency: config.WORKER_CONCURRENCY,
    adaptive: link.adaptive,
    commitBatch: config.WORKER_COMMIT_BATCH,
    maxUnknownWaiting: config.WORKER_MAX_UNKNOWN_WAITING,
    db: deps.database,
    platform: link.platform,
    logger: link.logger,
    metrics: link.metrics,
    orderGracePeriodMs: config.ORDER_GRACE_PERIOD,
    confirmMaxWaitMs: config.CONFIRM_MAX_WAIT,
    // How soon a dead worker's jobs run again: the lock must lapse, then a stalled check must see it. The defaults
    // (lock max(30 s, 3 × PLATFORM_TIMEOUT), check every 30 s) suit production; the chaos suite shortens both. The lock
    // must outlive the slowest platform call by a wide margin.
    lockDurationMs: config.WORKER_LOCK_DURATION ?? Math.max(30_000, config.PLATFORM_TIMEOUT * 3),
    stalledIntervalMs: config.WORKER_STALLED_INTERVAL,
  });
}

/** The lane's maintenance queue worker: reconciliation sweeps and catalog refresh (docs/reconciliation.md). */
function maintenanceWorker(deps: LanesDeps, link: LaneLink): Promise<MaintenanceWorker> {
  const { config } = deps;
  return createMaintenanceWorker({
    onReviewOpened: alertOnReviewOpened(deps.alerts),
    connection: deps.redis,
    redisHealth: deps.redisHealth,
    prefix: config.QUEUE_PREFIX,
    merchant: link.merchant,
    name: deps.name,
    db: deps.database,
    platform: link.platform,
    logger: link.logger,
    metrics: link.metrics,
    redis: deps.redis,
    lockKey: link.keys.sweepLock,
    merchantNo: link.merchant.merchantNo,
    settings: sweepSettingsFromConfig(config),
    reconcileMetrics: createReconcileMetrics(link.registry),
    reconcileEveryMs: config.RECONCILE_INTERVAL,
    catalogRefreshEveryMs: config.CATALOG_REFRESH_INTERVAL,
    catalogScope: catalogScopeOf(link.merchant),
  });
}

/** One force for several: each is started at once. */
function allOf(forces: readonly (() => Promise<void>)[]): () => Promise<void> {
  return async () => void (await Promise.all(forces.map((f) => f())));
}
