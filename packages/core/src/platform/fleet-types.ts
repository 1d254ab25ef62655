/**
 * The fleet's shared types, at the bottom of the platform module: the budget's options and plan, the handle the
 * guard and the breaker use, and the state the console reads. Types only, so fleet.ts, fleet-link.ts,
 * fleet-queue.ts, fleet-breaker.ts and guard.ts import them without importing each other.
 */
import type { Registry } from 'prom-client';
import type { Logger } from '../logger.ts';
import type { FleetKeys } from '../queue/keys.ts';
import type { RedisClient } from '../redis-nodes.ts';

/** Options of {@link createFleet}. */
export interface FleetOptions {
  /** The queue's Redis connection (single, Sentinel or cluster). */
  redis: RedisClient;
  /** Its keys: `merchantKeys(QUEUE_PREFIX, ref).fleet` (in the merchant's slot on a cluster). */
  keys: FleetKeys;
  /** Whose budget and breaker, for logs: the merchant's ref. @defaultValue 'all' */
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

/** The budget's GCRA parameters, its keys and this process's name, from {@link FleetOptions}. */
export interface FleetPlan {
  scope: string;
  keys: FleetKeys;
  maxRps: number;
  /** How long a Redis call may take, in ms. */
  timeoutMs: number;
  /** The fleet's probe token lasts this long, in ms. */
  probeIntervalMs: number;
  processId: string;
  /** Start times are this far apart (1 s / budget), in µs; 0 with no budget. */
  intervalUs: number;
  /** The burst allowed after a pause, in µs. */
  toleranceUs: number;
  /** How far ahead start times may be reserved, in µs. */
  horizonUs: number;
  /** A start time whose timer fires later than this, in ms, is not used (see the pump). */
  staleMs: number;
}

/** What the console shows: is the platform being throttled, or the fleet's breaker open? */
export interface FleetState {
  breakerOpen: boolean;
  /** The budget refused or cut a reservation within the last `recentMs`. */
  throttled: boolean;
  /** Processes alive within 10 s. */
  processes: number;
}
