import { eventLoopDelaySampler } from './adaptive-concurrency.ts';

/**
 * Fair where lanes share (issue 50). The lanes of one worker process share its event loop and its CPU: a merchant
 * whose platform is slow and whose backlog is large keeps a thousand jobs in flight, and its replies, look-ups and
 * commits fill the loop, so a light merchant's few jobs wait behind them at every step (its callback-to-credit p99
 * went from 80 ms alone to about a second). Each lane's own adaptive limit cannot see it: the loop's delay is
 * everybody's, and the heavy lane's Get order is as slow as ever.
 *
 * So, every window, the process looks at its own event-loop delay, its own CPU, and which lanes started jobs lately:
 * - one lane busy (or none): nothing is held, the lane has the whole process (work-conserving);
 * - several busy, the loop late beyond `targetDelayMs` and the process itself busy (`busyCpu` of a core, so that the
 *   lateness is its own work's, not another process's on the same cores): each lane that started more than its
 *   weighted share of the jobs (weight over the busy lanes' weights) is held: its jobs in flight are capped a little
 *   below what it runs, a few per cent a window, until the loop keeps up. A lane below its share (a light merchant)
 *   is never held;
 * - the loop on time again (under half the target), or the process not the one keeping the cores busy: the caps
 *   loosen a few per cent a window, and go once they pass the lane's own limit.
 * Jobs started stand for CPU: each costs about the same (fetch, look-up, commit, completion). Held by weight, two heavy
 * lanes split the process in proportion to their weights; a light lane's jobs meet a loop that is on time.
 */
export interface LaneGovernor {
  /** This process's mean event-loop delay over the last window, in ms beyond the sampling period. */
  loopDelayMs(): number;
  /** The cap on lane `ref`'s jobs in flight now; Infinity while it is not held. */
  capOf(ref: string): number;
  stop(): void;
}

/** What the governor reads of a lane. */
export interface GovernedLane {
  ref: string;
  /** Its share under contention (MERCHANTS_FILE `weight`). */
  weight: number;
  /** Jobs it has started since it was made (a counter). */
  started(): number;
  /** Jobs it runs now. */
  inFlight(): number;
  /** Its own limit now (adaptive, or pinned). */
  limit(): number;
}

/** Options of {@link createLaneGovernor}. */
export interface LaneGovernorOptions {
  lanes: readonly GovernedLane[];
  /** Mean event-loop delay (ms beyond the 10 ms sampling) above which busy lanes are held. @defaultValue 10 */
  targetDelayMs?: number;
  /** How often the caps are worked out, in ms. @defaultValue 100 */
  windowMs?: number;
  /** A lane that started a job within this many windows is busy. @defaultValue 10 */
  busyWindows?: number;
  /** Lowest cap of a held lane. @defaultValue 8 */
  minCap?: number;
  /** Share of one core this process must use over a window for its lateness to be its own. @defaultValue 0.7 */
  busyCpu?: number;
  /** The loop's delay (tests give their own). @defaultValue monitorEventLoopDelay, 10 ms resolution */
  sampleDelayMs?: () => number;
  /** This process's CPU since the last call, in cores (tests give their own). @defaultValue process.cpuUsage */
  sampleCpu?: () => number;
}

/** One window's facts about one lane, for {@link nextCaps}. */
export interface LaneWindow {
  ref: string;
  weight: number;
  /** Jobs it started over the last `busyWindows` windows. */
  recentStarts: number;
  inFlight: number;
  limit: number;
  /** Its cap now (Infinity: not held). */
  cap: number;
}

/** How fast a held lane's cap moves per window: down while the loop is late, up once it is on time. */
const DOWN = 0.97;
const UP = 1.03;

/**
 * The caps of the next window, from this one's loop delay and lanes (the governor's decision, pure). See
 * {@link LaneGovernor}.
 */
export function nextCaps(
  lanes: readonly LaneWindow[],
  loop: { delayMs: number; cpu: number },
  options: { targetDelayMs: number; minCap: number; busyCpu: number },
): Map<string, number> {
  const busy = lanes.filter((l) => l.recentStarts > 0);
  const caps = new Map<string, number>();
  if (busy.length < 2) {
    for (const l of lanes) caps.set(l.ref, Infinity);
    return caps;
  }
  const starts = busy.reduce((n, l) => n + l.recentStarts, 0);
  const weights = busy.reduce((n, l) => n + l.weight, 0);
  const ours = loop.cpu >= options.busyCpu;
  const late = ours && loop.delayMs > options.targetDelayMs;
  const onTime = !ours || loop.delayMs < options.targetDelayMs / 2;
  for (const l of lanes) {
    const overShare = l.recentStarts / starts > l.weight / weights;
    let cap = l.cap;
    if (late && overShare) cap = Math.max(options.minCap, Math.floor(Math.min(cap, l.inFlight) * DOWN));
    else if (onTime || !overShare) cap = cap * UP + 1;
    caps.set(l.ref, cap >= l.limit ? Infinity : cap);
  }
  return caps;
}

/** Start the process's governor over `lanes` (see {@link LaneGovernor}); `stop()` ends its timer. */
export function createLaneGovernor(options: LaneGovernorOptions): LaneGovernor {
  const targetDelayMs = options.targetDelayMs ?? 10;
  const minCap = options.minCap ?? 8;
  const busyWindows = options.busyWindows ?? 10;
  const busyCpu = options.busyCpu ?? 0.7;
  const sample = options.sampleDelayMs ?? eventLoopDelaySampler();
  const sampleCpu = options.sampleCpu ?? cpuSampler();
  const caps = new Map(options.lanes.map((l) => [l.ref, Infinity]));
  const history = new Map(options.lanes.map((l) => [l.ref, { last: l.started(), windows: [] as number[] }]));
  let delayMs = 0;
  const tick = () => {
    delayMs = sample();
    const cpu = sampleCpu();
    const windows = options.lanes.map((l): LaneWindow => {
      const h = history.get(l.ref)!;
      const now = l.started();
      h.windows.push(now - h.last);
      h.last = now;
      if (h.windows.length > busyWindows) h.windows.shift();
      const recentStarts = h.windows.reduce((n, s) => n + s, 0);
      return {
        ref: l.ref,
        weight: l.weight,
        recentStarts,
        inFlight: l.inFlight(),
        limit: l.limit(),
        cap: caps.get(l.ref)!,
      };
    });
    for (const [ref, cap] of nextCaps(windows, { delayMs, cpu }, { targetDelayMs, minCap, busyCpu }))
      caps.set(ref, cap);
  };
  const timer = setInterval(tick, options.windowMs ?? 100);
  timer.unref();
  return {
    loopDelayMs: () => delayMs,
    capOf: (ref) => caps.get(ref) ?? Infinity,
    stop: () => clearInterval(timer),
  };
}

/** Cores this process used since the last call (user and system CPU over wall time). */
function cpuSampler(): () => number {
  let last = process.cpuUsage();
  let at = performance.now();
  return () => {
    const now = performance.now();
    const used = process.cpuUsage(last);
    last = process.cpuUsage();
    const wall = Math.max(1, now - at);
    at = now;
    return (used.user + used.system) / 1000 / wall;
  };
}
