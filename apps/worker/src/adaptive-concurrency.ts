import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { PlatformSample } from '@mcb/core/platform';

/** Mean event-loop delay (ms) since the last call: how late this process runs its callbacks (for `loopDelayMs`). */
export function eventLoopDelaySampler(): () => number {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return () => {
    // The histogram counts the delay beyond the 10 ms sampling period itself.
    const mean = h.count > 0 ? h.mean / 1e6 : 0;
    h.reset();
    return Math.max(0, mean - 10);
  };
}

/** Options of {@link createAdaptiveLimit}. Latencies are Get order's, as the platform guard measures them. */
export interface AdaptiveLimitOptions {
  /** Fewest jobs in flight. @defaultValue 8 */
  min?: number;
  /** Most jobs in flight (WORKER_MAX_IN_FLIGHT). @defaultValue 1024 */
  max?: number;
  /**
   * Where the limit starts: the fixed concurrency of before, no more than a worker ran at once then. Lower, a burst
   * met at 500 ms of Get order spent its first second ramping (bench: 0.74 of the 0 ms rate, against 0.84 with the
   * limit already high). @defaultValue 256
   */
  initial?: number;
  /**
   * Get order requests per second at most (PLATFORM_MAX_RPS, 0 = none): more jobs in flight than that rate times
   * Get order's latency (Little's law, with room for the commit) would only wait for request slots.
   */
  maxRps?: number;
  /** Latency may grow by this factor over its long-run value before the limit is cut. @defaultValue 1.5 */
  tolerance?: number;
  /** Latencies this close (ms) count as equal: below it, jitter and our own CPU, not the platform. @defaultValue 25 */
  noiseMs?: number;
  /** Share of outage-like failures in a window that halves the limit. @defaultValue 0.1 */
  maxErrorRate?: number;
  /**
   * This process's own event-loop delay over the window (ms), subtracted from the window's latency: a worker whose
   * CPU is saturated sees every reply late, and that is not the platform slowing down. @defaultValue none
   */
  loopDelayMs?: () => number;
}

/** The limit's inputs and its current value. `update()` is called on a timer (every 100 ms in the worker). */
export interface AdaptiveLimit {
  /** Jobs allowed in flight now (whole number, within min..max). */
  readonly limit: number;
  readonly inFlight: number;
  /** Jobs started since it was made (a counter: the lane governor's measure of a lane's work). */
  readonly started: number;
  /** Get order's long-run latency (ms) as the limiter sees it; undefined before the first sample. */
  readonly baselineMs: number | undefined;
  jobStarted(): void;
  jobEnded(): void;
  sample(s: PlatformSample): void;
  /** The circuit breaker opened (true) or recovered (false): while open, the limit is held at its minimum. */
  paused(open: boolean): void;
  /** Fold the window's samples into a new limit; returns it. */
  update(): number;
}

/**
 * A gradient limiter in the spirit of Netflix's concurrency-limits (Gradient2), per window rather than per sample:
 * - jobs in flight follow Little's law: while latency holds near its long-run value the limit grows, doubling per
 *   window while it is full (slow start) and by a quarter while it is in use, so it reaches throughput × latency
 *   within a second or two, whatever the latency;
 * - when latency rises above `tolerance` × its long-run value the limit is cut in proportion (at most by half);
 * - when outage-like failures pass `maxErrorRate` of a window the limit halves (AIMD's multiplicative decrease);
 * - a limit that is not in use (fewer than half of it in flight) does not grow;
 * - the long-run latency follows the short one slowly, so a platform that settles at a new, slower pace gets the
 *   limit back as its latency becomes the new normal.
 */
export function createAdaptiveLimit(options: AdaptiveLimitOptions = {}): AdaptiveLimit {
  const min = options.min ?? 8;
  const max = Math.max(min, options.max ?? 1024);
  const tolerance = options.tolerance ?? 1.5;
  const noise = options.noiseMs ?? 25;
  const maxErrorRate = options.maxErrorRate ?? 0.1;
  let limit = Math.min(max, Math.max(min, options.initial ?? 256));
  let inFlight = 0;
  let started = 0;
  let longRtt: number | undefined;
  let open = false;
  let window = { ok: 0, sumMs: 0, failed: 0, peakInFlight: 0 };
  const clamp = (n: number) => Math.min(max, Math.max(min, n));

  return {
    get limit() {
      return Math.round(limit);
    },
    get inFlight() {
      return inFlight;
    },
    get started() {
      return started;
    },
    get baselineMs() {
      return longRtt;
    },
    jobStarted() {
      started++;
      inFlight++;
      if (inFlight > window.peakInFlight) window.peakInFlight = inFlight;
    },
    jobEnded() {
      inFlight = Math.max(0, inFlight - 1);
    },
    sample({ ms, ok }) {
      if (ok) {
        window.ok++;
        window.sumMs += ms;
      } else window.failed++;
    },
    paused(isOpen) {
      open = isOpen;
    },
    update() {
      const w = window;
      window = { ok: 0, sumMs: 0, failed: 0, peakInFlight: inFlight };
      if (open) return (limit = min);
      const count = w.ok + w.failed;
      if (count >= 5 && w.failed / count > maxErrorRate) return Math.round((limit = clamp(limit / 2)));
      if (w.ok === 0) return Math.round(limit);
      const shortRtt = Math.max(0, w.sumMs / w.ok - (options.loopDelayMs?.() ?? 0));
      if (longRtt === undefined) longRtt = shortRtt;
      else if (shortRtt < longRtt)
        longRtt = 0.5 * longRtt + 0.5 * shortRtt; // faster: follow improvements at once
      else longRtt = 0.95 * longRtt + 0.05 * shortRtt;
      const gradient = Math.min(1, Math.max(0.5, (tolerance * (longRtt + noise)) / (shortRtt + noise)));
      const inUse = w.peakInFlight >= limit * 0.5;
      // Slow start: a limit that was full the whole window doubles (Get order at 1 s needs ~throughput in flight
      // within a second or two of a burst); one merely in use grows by a quarter.
      const full = w.peakInFlight >= limit * 0.9 && inFlight >= limit * 0.9;
      let next = gradient < 1 ? limit * gradient : full ? limit * 2 : inUse ? limit * 1.25 + 1 : limit;
      if (options.maxRps) next = Math.min(next, Math.max(min, options.maxRps * ((longRtt + noise) / 1000) * 2));
      return Math.round((limit = clamp(next)));
    },
  };
}
