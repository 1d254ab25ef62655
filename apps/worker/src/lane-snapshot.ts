/**
 * A lane's live figures for the console's merchants page (issue 51): what only a worker sees of its merchant's Get
 * order (latency, errors, rate) and its breaker. Every `intervalMs` each worker process writes one field of the
 * merchant's hash (`merchantKeys(...).laneSnapshots`, field = the process), stamped with Redis's clock; the console
 * merges the fields younger than 3 × the interval and ignores (and removes) the rest, so a dead worker's figures
 * drop out within 3 intervals. The key itself expires 3 intervals after the last write of any worker.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from '@mcb/core/logger';
import type { BreakerState, PlatformSample } from '@mcb/core/platform';
import type { RedisClient } from '@mcb/core/redis';

/** What one worker publishes for one merchant (the console's merchants/lane-figures.ts reads it). */
export interface LaneSnapshot {
  /** The sampling window, in ms: the figures below are over the last `windowMs`. */
  windowMs: number;
  /** Get order calls ended in the window. */
  getOrders: number;
  /** Of those, outage-like failures (timeout, unreachable, 5xx, not the envelope). */
  getOrderErrors: number;
  /** p99 of their round trips, in ms; null with no call in the window. */
  getOrderP99Ms: number | null;
  /** This process's breaker for the merchant. */
  breaker: BreakerState;
  /** The merchant's Get order budget, requests per second for the whole fleet (0 = none). */
  getOrderRps: number;
}

export interface LaneSnapshotOptions {
  redis: RedisClient;
  /** `merchantKeys(QUEUE_PREFIX, ref).laneSnapshots`. */
  key: string;
  /** The guard's breaker, read at each write. */
  breaker: () => BreakerState;
  getOrderRps: number;
  logger: Pick<Logger, 'warn'>;
  /** How often the snapshot is written, in ms; the window is the same length. @defaultValue 5000 */
  intervalMs?: number;
  /** This process's field. @defaultValue host-pid-random */
  processId?: string;
}

export interface LaneSnapshotWriter {
  /** Told each Get order's outcome (the guard's onSample). */
  sample(sample: PlatformSample): void;
  /** Write now (tests; the timer calls it). */
  write(): Promise<void>;
  /** Stop writing and remove this process's field. */
  close(): Promise<void>;
}

/** Stamp with Redis's clock (workers' clocks differ), set this process's field, push the key's expiry out. */
const WRITE = `
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], ms .. ' ' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return ms`;

/** Samples kept at most per window: enough for a p99 at any rate a lane is allowed. */
const MAX_SAMPLES = 20_000;

export function createLaneSnapshot(options: LaneSnapshotOptions): LaneSnapshotWriter {
  const intervalMs = options.intervalMs ?? 5000;
  const field = options.processId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  let samples: { at: number; ms: number; ok: boolean }[] = [];
  let warned = false;

  const snapshot = (): LaneSnapshot => {
    const since = Date.now() - intervalMs;
    samples = samples.filter((s) => s.at >= since);
    const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
    return {
      windowMs: intervalMs,
      getOrders: samples.length,
      getOrderErrors: samples.filter((s) => !s.ok).length,
      getOrderP99Ms: sorted.length ? Math.round(sorted[Math.ceil(sorted.length * 0.99) - 1]!) : null,
      breaker: options.breaker(),
      getOrderRps: options.getOrderRps,
    };
  };

  const write = async () => {
    try {
      await options.redis.eval(WRITE, 1, options.key, field, JSON.stringify(snapshot()), String(intervalMs * 3));
      warned = false;
    } catch (e) {
      // The figures are for people; a Redis hiccup costs them one interval, never a job.
      if (!warned) options.logger.warn({ err: e }, 'lane snapshot not written');
      warned = true;
    }
  };
  const timer = setInterval(() => void write(), intervalMs);
  timer.unref();
  // The first at once, but after the caller's wiring (its breaker may be built after this writer).
  const first = setTimeout(() => void write(), 0);
  first.unref();

  return {
    sample(s) {
      if (samples.length >= MAX_SAMPLES) samples.shift();
      samples.push({ at: Date.now(), ms: s.ms, ok: s.ok });
    },
    write,
    async close() {
      clearInterval(timer);
      clearTimeout(first);
      await options.redis.hdel(options.key, field).catch(() => undefined);
    },
  };
}
