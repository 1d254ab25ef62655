/**
 * One Get order budget and one breaker state for the whole fleet (every worker, the sweep, the console), kept in
 * Redis beside the queue (docs/deployment.md "Sizing"). Work-conserving: a process reserves start times only while
 * it has requests waiting, so an idle process holds no share. A process that cannot reach Redis keeps to its last
 * fair share (the budget divided by the processes it last saw alive) until Redis answers again. The state is soft:
 * losing it (a failover, a flush) costs at most one burst of the tolerance, never a stall.
 *
 * `scope` names whose budget it is: one for the whole deployment today ('all'); a merchant number later, each with
 * its own budget and breaker, needs only another scope.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Counter, Gauge, type Registry } from 'prom-client';
import { AppError, ErrorCodes } from '../errors.ts';
import type { Logger } from '../logger.ts';
import type { RedisClient } from '../redis-nodes.ts';
import { decodeReserveReply, RESERVE_KEYS, RESERVE_LUA, type ReserveReply } from './fleet-script.ts';
import { createRateSpacer } from './guard.ts';

/** Options of {@link createFleet}. */
export interface FleetOptions {
  /** The queue's Redis connection (single, Sentinel or cluster). */
  redis: RedisClient;
  /** QUEUE_PREFIX: the keys live under it and so carry its hash tag on a cluster. */
  prefix: string;
  /** Whose budget and breaker: 'all' (the deployment) by default; a merchant number later. */
  scope?: string;
  /** The fleet's Get order requests per second (PLATFORM_MAX_RPS); 0 = no budget (the breaker is still shared). */
  maxRps: number;
  /** Probes of an open breaker per second, the whole fleet together. @defaultValue 3 */
  probesPerSecond?: number;
  /** How long a Redis call may take before this process falls back to its own share, in ms. @defaultValue 1000 */
  redisTimeoutMs?: number;
  /** Metrics of the budget and the shared breaker are registered here when given. */
  registry?: Registry;
  logger?: Pick<Logger, 'info' | 'warn'>;
  /** This process's name in the alive set. @defaultValue host-pid-random */
  processId?: string;
}

/** A process's handle on the fleet's budget and breaker state (used by {@link guardPlatform}). */
export interface Fleet {
  readonly scope: string;
  readonly maxRps: number;
  /** Wait for a start time of the fleet's budget (or of this process's share while Redis is away). */
  take(signal?: AbortSignal): Promise<void>;
  /** The fleet's breaker state as last seen. */
  breakerOpen(): boolean;
  /** Told when the fleet's breaker state, as this process sees it, changes. */
  onBreakerChange(listener: (open: boolean) => void): void;
  /** This process saw the platform fail repeatedly (or a probe fail): the fleet's breaker is open. */
  reportOpen(): void;
  /** This process saw the platform answer again: the fleet's breaker is closed. */
  reportClosed(): void;
  /** True when this process may send the next probe (the fleet's probe token, a few a second in all). */
  tryProbe(): Promise<boolean>;
  /** What this process knows now (tests, logs). */
  status(): { alive: number; fallback: boolean; breakerOpen: boolean };
  /** Stop the heartbeat, leave the alive set, fail the waiting requests. */
  close(): Promise<void>;
}

/** The fleet's keys of `scope` under `prefix` (all in the prefix's slot on a cluster). */
export function fleetKeys(prefix: string, scope = 'all') {
  const base = `${prefix}:platform:${scope}`;
  return { budget: `${base}:budget`, alive: `${base}:alive`, breaker: `${base}:breaker`, probe: `${base}:probe` };
}

/** Most start times reserved in one round trip. */
const MAX_LEASE = 64;
/** A process not heard of for this long no longer counts as alive. */
const ALIVE_WINDOW_MS = 10_000;
/** The keys vanish after this long without use (soft state). */
const KEYS_TTL_MS = 60_000;
/** An open breaker nobody confirms (no failed probe) for this long is forgotten: the next requests find out. */
const OPEN_TTL_MS = 30_000;
const COMMAND = 'mcbFleetReserve';

type Reserve = (budget: string, alive: string, breaker: string, ...args: (string | number)[]) => Promise<unknown>;

/** Coordinate this process's Get orders with the rest of the fleet through Redis. */
export function createFleet(options: FleetOptions): Fleet {
  const { redis, maxRps } = options;
  const scope = options.scope ?? 'all';
  const keys = fleetKeys(options.prefix, scope);
  const timeoutMs = options.redisTimeoutMs ?? 1000;
  const probeIntervalMs = Math.round(1000 / (options.probesPerSecond ?? 3));
  const processId = options.processId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  // Start times 1 s / budget apart; a burst of ⌊budget / 50⌋ (20 ms' worth) after a pause; reserved at most
  // max(50 ms, two intervals) ahead, so that one busy process cannot hold the next second's budget.
  const intervalUs = maxRps > 0 ? 1_000_000 / maxRps : 0;
  const toleranceUs = Math.floor(maxRps / 50) * intervalUs;
  const horizonUs = Math.max(50_000, 2 * intervalUs);
  // A start time whose timer fires later than this is not used (see the pump).
  const staleMs = Math.max(25, (2 * intervalUs) / 1000);
  if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: RESERVE_KEYS, lua: RESERVE_LUA });
  const reserveCommand = (redis as unknown as Record<string, Reserve>)[COMMAND]!.bind(redis);
  const metrics = options.registry ? fleetMetrics(options.registry, maxRps) : undefined;

  let alive = 0; // 0: never heard from Redis
  let fallback = false;
  let sharedOpen = false;
  let reportSeq = 0;
  let closed = false;
  const listeners: ((open: boolean) => void)[] = [];

  const withTimeout = <T>(p: Promise<T>): Promise<T> => {
    p.catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      // After this turn's I/O (setImmediate): a stalled event loop wakes to both the timer and a reply already read.
      const fail = () => reject(new Error(`fleet budget: Redis did not answer within ${timeoutMs} ms`));
      timer = setTimeout(() => setImmediate(fail), timeoutMs);
    });
    return Promise.race([p, late]).finally(() => clearTimeout(timer));
  };

  const setShared = (open: boolean) => {
    if (open === sharedOpen) return;
    sharedOpen = open;
    metrics?.breakerOpen.set(open ? 1 : 0);
    for (const l of listeners) l(open);
    reschedule();
  };

  /** One round trip: reserve `want` start times (0: only a heartbeat and a look at the breaker). */
  const reserve = async (want: number): Promise<ReserveReply> => {
    const seq = reportSeq;
    const raw = await withTimeout(
      reserveCommand(
        keys.budget,
        keys.alive,
        keys.breaker,
        intervalUs,
        toleranceUs,
        horizonUs,
        want,
        processId,
        ALIVE_WINDOW_MS,
        KEYS_TTL_MS,
      ),
    );
    const reply = decodeReserveReply(raw);
    alive = Math.max(1, reply.alive);
    metrics?.processes.set(alive);
    if (fallback) {
      fallback = false;
      metrics?.fallback.set(0);
      options.logger?.info({ scope, alive }, 'fleet budget: Redis answers again; back on the shared budget');
    }
    // A reply to a request sent before this process's own report is older than the report.
    if (seq === reportSeq) setShared(reply.breakerOpen);
    return reply;
  };

  const enterFallback = (e: unknown) => {
    if (fallback) return;
    fallback = true;
    metrics?.fallback.set(1);
    options.logger?.warn(
      { scope, alive, shareRps: share(), err: e },
      "fleet budget: Redis unreachable; keeping to this process's last fair share",
    );
    reschedule();
  };

  // This process's share while Redis is away: the budget over the processes last seen alive (1 rps before any).
  const share = () => (alive === 0 ? 1 : Math.max(1, Math.floor(maxRps / alive)));
  let local: { rps: number; spacer: ReturnType<typeof createRateSpacer> } | undefined;
  const localSpacer = () => {
    const rps = share();
    if (local?.rps !== rps) local = { rps, spacer: createRateSpacer(rps, 1000) };
    metrics?.shareRps.set(rps);
    return local.spacer;
  };

  // Heartbeat: keeps this process in the alive set and reads the breaker; often while the breaker is open (to see
  // it close), once a second while Redis is away (to see it back), every 2 s otherwise.
  let beat: NodeJS.Timeout | undefined;
  let beating = false;
  const heartbeat = async () => {
    if (beating || closed) return;
    beating = true;
    try {
      await reserve(0);
    } catch (e) {
      enterFallback(e);
    } finally {
      beating = false;
      reschedule();
    }
  };
  function reschedule() {
    if (closed) return;
    clearTimeout(beat);
    beat = setTimeout(() => void heartbeat(), sharedOpen ? 250 : fallback ? 1000 : 2000);
    beat.unref();
  }
  // The first once the connection is up: a process still connecting is not "Redis unreachable".
  if (redis.status === 'ready') void heartbeat();
  else redis.once('ready', () => void heartbeat());

  // Requests waiting for a start time, in arrival order; one pump reserves for them.
  type Waiter = { go: () => void; fail: (e: Error) => void; signal?: AbortSignal; done: boolean };
  const waiters: Waiter[] = [];
  let pumping = false;
  const nextWaiter = () => {
    while (waiters.length > 0) {
      const w = waiters.shift()!;
      if (!w.done) return w;
    }
    return undefined;
  };
  const pending = () => {
    while (waiters.length > 0 && waiters[0]!.done) waiters.shift();
    return waiters.length;
  };
  const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

  const pump = async () => {
    if (pumping) return;
    pumping = true;
    try {
      while (!closed && pending() > 0) {
        if (fallback) {
          await localSpacer().take();
          nextWaiter()?.go();
          metrics?.granted.inc({ mode: 'local' });
          continue;
        }
        const want = Math.min(pending(), MAX_LEASE);
        let reply: ReserveReply;
        try {
          reply = await reserve(want);
        } catch (e) {
          enterFallback(e);
          continue;
        }
        if (reply.throttled) metrics?.refusals.inc();
        let last = 0;
        for (const ms of reply.delaysMs) {
          const w = nextWaiter();
          if (!w) break; // its caller gave up meanwhile: the start time goes unused
          if (ms < 1) {
            metrics?.granted.inc({ mode: 'fleet' });
            w.go();
          } else {
            const due = performance.now() + ms;
            setTimeout(() => {
              // A timer that fires late (a stalled event loop) would bunch this start with the fleet's next ones: the
              // start time goes unused and the request asks again, first in line.
              if (w.done) return;
              if (performance.now() - due <= staleMs) {
                metrics?.granted.inc({ mode: 'fleet' });
                return w.go();
              }
              waiters.unshift(w);
              void pump();
            }, ms);
          }
          last = ms;
        }
        // Ask again half a horizon before the lease is spent (so that a late timer does not let the budget's next
        // start times pass unused), or when the budget has room again.
        const wait =
          reply.delaysMs.length === 0 ? reply.retryMs + Math.random() * (intervalUs / 1000) : last - horizonUs / 2000;
        if (wait >= 1) await pause(wait);
      }
    } finally {
      pumping = false;
    }
  };

  let nextProbeAt = 0; // this process asks for the probe token at most once per probe interval

  return {
    scope,
    maxRps,
    take(signal) {
      if (maxRps <= 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const w: Waiter = {
          done: false,
          signal,
          go: () => {
            if (w.done) return;
            w.done = true;
            resolve();
          },
          fail: (e) => {
            if (w.done) return;
            w.done = true;
            reject(e);
          },
        };
        if (signal?.aborted)
          return w.fail(new AppError(ErrorCodes.PLATFORM_ABORTED, 'aborted while waiting for a request slot'));
        signal?.addEventListener(
          'abort',
          () => w.fail(new AppError(ErrorCodes.PLATFORM_ABORTED, 'aborted while waiting for a request slot')),
          { once: true },
        );
        waiters.push(w);
        void pump();
      });
    },
    breakerOpen: () => sharedOpen,
    onBreakerChange: (listener) => void listeners.push(listener),
    reportOpen() {
      reportSeq++;
      setShared(true);
      withTimeout(redis.set(keys.breaker, processId, 'PX', OPEN_TTL_MS)).catch(() => undefined);
    },
    reportClosed() {
      reportSeq++;
      setShared(false);
      withTimeout(redis.del(keys.breaker)).catch(() => undefined);
    },
    async tryProbe() {
      if (Date.now() < nextProbeAt) return false;
      nextProbeAt = Date.now() + probeIntervalMs;
      try {
        const won = (await withTimeout(redis.set(keys.probe, processId, 'PX', probeIntervalMs, 'NX'))) === 'OK';
        if (won) metrics?.probes.inc();
        return won;
      } catch {
        // Redis away: probe on this process's own, at its share of the fleet's probe rate.
        nextProbeAt = Date.now() + probeIntervalMs * Math.max(1, alive);
        metrics?.probes.inc();
        return true;
      }
    },
    status: () => ({ alive, fallback, breakerOpen: sharedOpen }),
    async close() {
      closed = true;
      clearTimeout(beat);
      for (let w = nextWaiter(); w; w = nextWaiter())
        w.fail(new AppError(ErrorCodes.PLATFORM_ABORTED, 'the platform client is closing'));
      await withTimeout(redis.zrem(keys.alive, processId)).catch(() => undefined);
    },
  };
}

/** The budget's and the shared breaker's metrics of one process. */
function fleetMetrics(registry: Registry, maxRps: number) {
  const registers = [registry];
  const budget = new Gauge({
    name: 'mcb_platform_budget_rps',
    help: 'Get order requests per second the whole fleet may send (PLATFORM_MAX_RPS; 0 = none)',
    registers,
  });
  budget.set(maxRps);
  const granted = new Counter({
    name: 'mcb_platform_budget_granted_total',
    help: 'Get order start times this process used: from the fleet budget, or locally (its last fair share) while Redis was away',
    labelNames: ['mode'],
    registers,
  });
  granted.inc({ mode: 'fleet' }, 0);
  granted.inc({ mode: 'local' }, 0);
  return {
    granted,
    refusals: new Counter({
      name: 'mcb_platform_budget_refusals_total',
      help: 'Reservations the fleet budget refused or cut short: the fleet asked for more than the budget (throttled)',
      registers,
    }),
    fallback: new Gauge({
      name: 'mcb_platform_budget_fallback',
      help: '1 while Redis is unreachable and this process keeps to its last fair share of the budget',
      registers,
    }),
    shareRps: new Gauge({
      name: 'mcb_platform_budget_share_rps',
      help: "This process's share of the budget while Redis is unreachable (budget / processes last seen alive)",
      registers,
    }),
    processes: new Gauge({
      name: 'mcb_platform_fleet_processes',
      help: 'Processes sharing the Get order budget, as last seen (alive within 10 s)',
      registers,
    }),
    breakerOpen: new Gauge({
      name: 'mcb_platform_fleet_breaker_open',
      help: "1 while the fleet's shared circuit breaker is open (as this process last saw it)",
      registers,
    }),
    probes: new Counter({
      name: 'mcb_platform_fleet_probes_total',
      help: 'Probes of an open breaker this process sent (the fleet sends a few a second in all)',
      registers,
    }),
  };
}

/** What the console shows: is the platform being throttled, or the fleet's breaker open? */
export interface FleetState {
  breakerOpen: boolean;
  /** The budget refused or cut a reservation within the last `recentMs`. */
  throttled: boolean;
  /** Processes alive within 10 s. */
  processes: number;
}

/** Read the fleet's state of `scope` (one round trip; Redis's clock). */
export async function readFleetState(
  redis: RedisClient,
  prefix: string,
  options: { scope?: string; recentMs?: number } = {},
): Promise<FleetState> {
  const keys = fleetKeys(prefix, options.scope);
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
