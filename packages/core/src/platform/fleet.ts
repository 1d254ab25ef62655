/**
 * One Get order budget and one breaker state for the whole fleet (every worker, the sweep, the console), kept in
 * Redis beside the queue (docs/deployment.md "Sizing"). Work-conserving: a process reserves start times only while
 * it has requests waiting, so an idle process holds no share. A process that cannot reach Redis keeps to its last
 * fair share (the budget divided by the processes it last saw alive) until Redis answers again. The state is soft:
 * losing it (a failover, a flush) costs at most one burst of the tolerance, never a stall; a budget timestamp written
 * under a faster clock is clamped by the script, and no process waits more than a second between reservations.
 *
 * Each merchant has its own budget and breaker: `keys` come from `merchantKeys(QUEUE_PREFIX, ref).fleet`, and
 * `scope` (the ref) names it in logs.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AppError, ErrorCodes } from '../errors.ts';
import type { RedisClient } from '../redis-nodes.ts';
import { createFleetLink, type FleetLink } from './fleet-link.ts';
import { fleetMetrics, type FleetMetrics } from './fleet-metrics.ts';
import { createFleetQueue } from './fleet-queue.ts';
import type { Fleet, FleetOptions, FleetPlan, FleetState } from './fleet-types.ts';
import type { FleetKeys } from '../queue/keys.ts';

export type { Fleet, FleetOptions, FleetPlan, FleetState } from './fleet-types.ts';

/** An open breaker nobody confirms (no failed probe) for this long is forgotten: the next requests find out. */
const OPEN_TTL_MS = 30_000;

/** The plan of `options` (defaults filled in). */
export function fleetPlan(options: FleetOptions): FleetPlan {
  const { maxRps } = options;
  const scope = options.scope ?? 'all';
  // Start times 1 s / budget apart; a burst of ⌊budget / 50⌋ (20 ms' worth) after a pause; reserved at most
  // max(50 ms, two intervals) ahead, so that one busy process cannot hold the next second's budget.
  const intervalUs = maxRps > 0 ? 1_000_000 / maxRps : 0;
  return {
    scope,
    keys: options.keys,
    maxRps,
    timeoutMs: options.redisTimeoutMs ?? 1000,
    probeIntervalMs: Math.round(1000 / (options.probesPerSecond ?? 3)),
    processId: options.processId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`,
    intervalUs,
    toleranceUs: Math.floor(maxRps / 50) * intervalUs,
    horizonUs: Math.max(50_000, 2 * intervalUs),
    staleMs: Math.max(25, (2 * intervalUs) / 1000),
  };
}

/** Coordinate this process's Get orders with the rest of the fleet through Redis. */
export function createFleet(options: FleetOptions): Fleet {
  const { redis, maxRps } = options;
  const plan = fleetPlan(options);
  const { keys, processId } = plan;
  const metrics = options.registry ? fleetMetrics(options.registry, maxRps) : undefined;
  const link = createFleetLink(redis, plan, metrics, options.logger);
  const { state, withTimeout } = link;
  link.start();
  const queue = createFleetQueue(link, plan, metrics);
  const tryProbe = probeToken(link, plan, redis, metrics);

  return {
    scope: plan.scope,
    maxRps,
    take(signal) {
      if (maxRps <= 0) return Promise.resolve();
      return queue.take(signal);
    },
    breakerOpen: () => state.sharedOpen,
    onBreakerChange: (listener) => link.onBreakerChange(listener),
    reportOpen() {
      state.reportSeq++;
      link.setShared(true);
      withTimeout(redis.set(keys.breaker, processId, 'PX', OPEN_TTL_MS)).catch(() => undefined);
    },
    reportClosed() {
      state.reportSeq++;
      link.setShared(false);
      withTimeout(redis.del(keys.breaker)).catch(() => undefined);
    },
    tryProbe,
    status: () => ({ alive: state.alive, fallback: state.fallback, breakerOpen: state.sharedOpen }),
    async close() {
      state.closed = true;
      link.stop();
      queue.failAll(() => new AppError(ErrorCodes.PLATFORM_ABORTED, 'the platform client is closing'));
      await withTimeout(redis.zrem(keys.alive, processId)).catch(() => undefined);
    },
  };
}

/** The fleet's probe token: this process asks for it at most once per probe interval. */
function probeToken(
  link: FleetLink,
  plan: FleetPlan,
  redis: RedisClient,
  metrics: FleetMetrics | undefined,
): () => Promise<boolean> {
  const { probeIntervalMs } = plan;
  let nextProbeAt = 0;
  return async () => {
    if (Date.now() < nextProbeAt) return false;
    nextProbeAt = Date.now() + probeIntervalMs;
    try {
      const won =
        (await link.withTimeout(redis.set(plan.keys.probe, plan.processId, 'PX', probeIntervalMs, 'NX'))) === 'OK';
      if (won) metrics?.probes.inc();
      return won;
    } catch {
      // Redis away: probe on this process's own, at its share of the fleet's probe rate.
      nextProbeAt = Date.now() + probeIntervalMs * Math.max(1, link.state.alive);
      metrics?.probes.inc();
      return true;
    }
  };
}

/** Read the fleet's state of `scope` (one round trip; Redis's clock). */
export async function readFleetState(
  redis: RedisClient,
  keys: FleetKeys,
  options: { recentMs?: number } = {},
): Promise<FleetState> {
  const replies = await redis
    .pipeline()
    .exists(keys.breaker)
    .hget(keys.budget, 'throttled')
    .zcard(keys.alive)
    .time()
    .exec();
  const value = (i: number) => {
    const [err, v] = replies?.[i] ?? [new Error('no reply'), undefined];
    if (err) throw err;
    return v;
  };
  const [sec, usec] = (value(3) as [string, string]).map(Number) as [number, number];
  const nowMs = sec * 1000 + Math.floor(usec / 1000);
  const throttledAt = Number(value(1) ?? 0);
  return {
    breakerOpen: value(0) === 1,
    throttled: throttledAt > 0 && nowMs - throttledAt <= (options.recentMs ?? 10_000),
    processes: Number(value(2)),
  };
}
