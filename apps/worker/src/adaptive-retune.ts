import type { AdaptiveLimit } from './adaptive-concurrency.ts';
import { loopsFetching, ALL_LOOPS_FROM, type FetchLoopGroup } from './fetch-loops.ts';
import type { WorkerMetrics } from './metrics.ts';

/**
 * How often the adaptive limit folds its samples into a new limit. 100 ms: a full limit doubles per window, so at
 * 500 ms of Get order it reaches ~throughput x latency within about 0.3 s of the first replies (250 ms windows took
 * 0.75 s, a quarter of a 3,000-callback burst).
 */
export const LIMIT_WINDOW_MS = 100;

/**
 * Every {@link LIMIT_WINDOW_MS}, fold the adaptive limit's samples into a new limit (it follows Get order's latency
 * and failures, Little's law), hold it under `cap` (the process's lane governor: lane-governor.ts), and spread it over
 * the fetch loops it calls for (fetch-loops.ts: all of them from a limit of `allLoopsFrom`, 256, else the first);
 * BullMQ reads each loop's share before each fetch. Returns the stop.
 */
export function retuneFetchLoops(
  loops: Pick<FetchLoopGroup<unknown, unknown>, 'share'> & { readonly fetchLoops: readonly unknown[] },
  adaptive: AdaptiveLimit,
  metrics: WorkerMetrics | undefined,
  allLoopsFrom = ALL_LOOPS_FROM,
  cap: () => number = () => Infinity,
): () => void {
  const retune = setInterval(() => {
    const limit = Math.max(1, Math.min(adaptive.update(), cap()));
    loops.share(limit, loopsFetching(limit, loops.fetchLoops.length, allLoopsFrom));
    metrics?.inFlightLimit.set(limit);
  }, LIMIT_WINDOW_MS);
  retune.unref();
  return () => clearInterval(retune);
}
