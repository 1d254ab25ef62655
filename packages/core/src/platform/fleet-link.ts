/**
 * One process's link to the fleet's state in Redis (fleet.ts): the reserve round trip, the heartbeat that keeps the
 * process in the alive set and reads the shared breaker, and the fallback to the process's last fair share of the
 * budget while Redis does not answer.
 */
import type { Logger } from '../logger.ts';
import type { RedisClient } from '../redis-nodes.ts';
import type { FleetPlan } from './fleet-types.ts';
import type { FleetMetrics } from './fleet-metrics.ts';
import { decodeReserveReply, RESERVE_KEYS, RESERVE_LUA, type ReserveReply } from './fleet-script.ts';
import { createRateSpacer } from './rate-spacer.ts';

/** A process not heard of for this long no longer counts as alive. */
const ALIVE_WINDOW_MS = 10_000;
/** The keys vanish after this long without use (soft state). */
const KEYS_TTL_MS = 60_000;
const COMMAND = 'mcbFleetReserve';

type Reserve = (budget: string, alive: string, breaker: string, ...args: (string | number)[]) => Promise<unknown>;

/** What this process knows of the fleet now; the link writes it, the fleet's parts read it. */
export interface FleetLinkState {
  /** Processes alive as last seen; 0: never heard from Redis. */
  alive: number;
  /** True while Redis does not answer and this process keeps to its own share. */
  fallback: boolean;
  /** The fleet's breaker state as last seen (or as this process last reported it). */
  sharedOpen: boolean;
  /** Counts this process's own breaker reports: a reply to a request sent before one is older than it. */
  reportSeq: number;
  closed: boolean;
}

/** The link's operations (see the module's comment). */
export interface FleetLink {
  readonly state: FleetLinkState;
  /** `p`, or a rejection once Redis has not answered within the plan's timeout. */
  withTimeout<T>(p: Promise<T>): Promise<T>;
  /** One round trip: reserve `want` start times (0: only a heartbeat and a look at the breaker). */
  reserve(want: number): Promise<ReserveReply>;
  /** Redis did not answer: keep to this process's last fair share until it does. */
  enterFallback(e: unknown): void;
  /** Record the fleet's breaker state, telling the listeners when it changes. */
  setShared(open: boolean): void;
  onBreakerChange(listener: (open: boolean) => void): void;
  /** The spacer of this process's share while Redis is away (rebuilt when the share changes). */
  localSpacer(): ReturnType<typeof createRateSpacer>;
  /** Send the first heartbeat once the connection is up. */
  start(): void;
  /** Stop the heartbeat. */
  stop(): void;
}

/** Define the reserve script on `redis` (once per connection) and return it bound. */
function reserveCommandOf(redis: RedisClient): Reserve {
  if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: RESERVE_KEYS, lua: RESERVE_LUA });
  return (redis as unknown as Record<string, Reserve>)[COMMAND]!.bind(redis);
}

/** A promise that rejects once `timeoutMs` has passed, after that turn's I/O; `p`'s own rejection is observed. */
function raceTimeout<T>(p: Promise<T>, timeoutMs: number): Promise<T> {
  p.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    // After this turn's I/O (setImmediate): a stalled event loop wakes to both the timer and a reply already read.
    const fail = () => reject(new Error(`fleet budget: Redis did not answer within ${timeoutMs} ms`));
    timer = setTimeout(() => setImmediate(fail), timeoutMs);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** Link this process to the fleet's keys of `plan`; the reserve script is defined on `redis` now. */
export function createFleetLink(
  redis: RedisClient,
  plan: FleetPlan,
  metrics: FleetMetrics | undefined,
  logger: Pick<Logger, 'info' | 'warn'> | undefined,
): FleetLink {
  const { scope, keys } = plan;
  const reserveCommand = reserveCommandOf(redis);
  const state: FleetLinkState = { alive: 0, fallback: false, sharedOpen: false, reportSeq: 0, closed: false };
  const listeners: ((open: boolean) => void)[] = [];
  const withTimeout = <T>(p: Promise<T>): Promise<T> => raceTimeout(p, plan.timeoutMs);

  const setShared = (open: boolean) => {
    if (open === state.sharedOpen) return;
    state.sharedOpen = open;
    metrics?.breakerOpen.set(open ? 1 : 0);
    for (const l of listeners) l(open);
    heart.reschedule();
  };

  const reserve = async (want: number): Promise<ReserveReply> => {
    const seq = state.reportSeq;
    const raw = await withTimeout(
      reserveCommand(
        keys.budget,
        keys.alive,
        keys.breaker,
        plan.intervalUs,
        plan.toleranceUs,
        plan.horizonUs,
        want,
        plan.processId,
        ALIVE_WINDOW_MS,
        KEYS_TTL_MS,
      ),
    );
    const reply = decodeReserveReply(raw);
    if (reply.clamped) {
      metrics?.clamps.inc();
      logger?.warn(
        { scope },
        "fleet budget: the budget's timestamp was ahead of Redis's clock (a clock stepped back: a failover, NTP); clamped",
      );
    }
    state.alive = Math.max(1, reply.alive);
    metrics?.processes.set(state.alive);
    if (state.fallback) {
      state.fallback = false;
      metrics?.fallback.set(0);
      logger?.info({ scope, alive: state.alive }, 'fleet budget: Redis answers again; back on the shared budget');
    }
    // A reply to a request sent before this process's own report is older than the report.
    if (seq === state.reportSeq) setShared(reply.breakerOpen);
    return reply;
  };

  // This process's share while Redis is away: the budget over the processes last seen alive (1 rps before any).
  const share = () => (state.alive === 0 ? 1 : Math.max(1, Math.floor(plan.maxRps / state.alive)));

  const enterFallback = (e: unknown) => {
    if (state.fallback) return;
    state.fallback = true;
    metrics?.fallback.set(1);
    logger?.warn(
      { scope, alive: state.alive, shareRps: share(), err: e },
      "fleet budget: Redis unreachable; keeping to this process's last fair share",
    );
    heart.reschedule();
  };

  let local: { rps: number; spacer: ReturnType<typeof createRateSpacer> } | undefined;
  const localSpacer = () => {
    const rps = share();
    if (local?.rps !== rps) local = { rps, spacer: createRateSpacer(rps, 1000) };
    metrics?.shareRps.set(rps);
    return local.spacer;
  };

  const heart = heartbeatOf(state, reserve, enterFallback);
  return {
    state,
    withTimeout,
    reserve,
    enterFallback,
    setShared,
    onBreakerChange: (listener) => void listeners.push(listener),
    localSpacer,
    start() {
      // The first once the connection is up: a process still connecting is not "Redis unreachable".
      if (redis.status === 'ready') void heart.beat();
      else redis.once('ready', () => void heart.beat());
    },
    stop: () => heart.stop(),
  };
}

/**
 * The heartbeat: keeps this process in the alive set and reads the breaker; often while the breaker is open (to see
 * it close), once a second while Redis is away (to see it back), every 2 s otherwise.
 */
function heartbeatOf(
  state: FleetLinkState,
  reserve: (want: number) => Promise<unknown>,
  enterFallback: (e: unknown) => void,
) {
  let timer: NodeJS.Timeout | undefined;
  let beating = false;
  const beat = async () => {
    if (beating || state.closed) return;
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
    if (state.closed) return;
    clearTimeout(timer);
    timer = setTimeout(() => void beat(), state.sharedOpen ? 250 : state.fallback ? 1000 : 2000);
    timer.unref();
  }
  return { beat, reschedule, stop: () => clearTimeout(timer) };
}
