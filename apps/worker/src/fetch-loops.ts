import type { Worker, WorkerListener, WorkerOptions } from 'bullmq';

/**
 * Why one worker process runs several BullMQ Workers on the same queue when its limit adapts.
 *
 * A BullMQ Worker fills its free slots one fetch at a time, and starts none of the jobs it fetched until the slots
 * are full or the queue is empty (`mainLoop` in bullmq's worker.ts: "we fetch jobs in sequence"). Each fetch is a
 * `moveToActive` script, a write that Redis fsyncs (AOF always) before it answers: about 2 ms on the bench's disk
 * while ingest writes too. So whenever many slots were free at once (a burst after a quiet spell, the adaptive limit
 * doubling), the worker processed nothing for as long as the fill took: 0.5 s for 256 slots, 0.8 s when the limit
 * went from 256 to 641 (`pnpm bench --only compare`, Get order at 500 ms, the worker's in-flight gauge sampled every
 * 100 ms). Spread over several Workers, the fills run side by side on the same connection (one fsync answers the
 * fetches of all of them) and each is a fraction as long.
 *
 * But the extra loops cost CPU whenever there is little to fill: at 0 ms of Get order the limit settles around 100-150
 * and the jobs in flight below it, and four loops fetching side by side took more `moveToActive` scripts a credit and
 * started the jobs more thinly, so the group commits were smaller (`pnpm bench --only compare --compare-delays 0`, one
 * loop against four, six pairs taken in turn: 0.14-0.15 Postgres transactions a credit against 0.20-0.24, 3.4 %
 * less CPU a credit for the whole system, a median callback-to-credit time 30-60 ms longer, the same p99). So while
 * the limit is below {@link ALL_LOOPS_FROM} only the first loop fetches; the others are parked (paused, their jobs in
 * progress run on) and take up their share again at the retune after the limit reaches it. A rule of one loop per 256
 * jobs in flight was tried and dropped: at 200 ms of Get order it left fewer loops fetching while the limit grew from
 * 256, and callback-to-credit doubled (p50 576-680 ms against 311-388, p99 1,373-1,543 against 720-728).
 */

/** The limit from which every loop fetches: the limit's starting value, so a burst at a slow Get order fills fast. */
export const ALL_LOOPS_FROM = 256;

/** Loops of `n` that fetch for a limit of `limit` jobs in flight: all from `from` on, below it the first one. */
export function loopsFetching(limit: number, n: number, from = ALL_LOOPS_FROM): number {
  return limit >= from ? n : 1;
}

/**
 * Jobs in flight of fetch loop `i` of `n` when the process may run `total`: shares differ by at most one, none below
 * 1.
 */
export function shareOf(total: number, n: number, i: number): number {
  return Math.max(1, Math.floor(total / n) + (i < total % n ? 1 : 0));
}

/** The job events a listener on a {@link FetchLoopGroup} hears from every one of its loops. */
export type JobEvent = 'active' | 'progress' | 'completed' | 'failed' | 'stalled' | 'error';

/**
 * The fetch loops of one process, owned and acting as one worker (graphile-worker's `Runner`): a listener hears
 * every loop's job events, and each lifecycle method acts on every loop. The BullMQ Workers stay as BullMQ built
 * them; nothing of theirs is overwritten.
 */
export interface FetchLoopGroup<D, R> {
  /** Every fetch loop; their concurrencies add up to the process's jobs in flight. */
  readonly fetchLoops: readonly Worker<D, R>[];
  /** The queue's name (as a BullMQ Worker's `name`). */
  readonly name: string;
  /** The options the loops were built with (the first loop's: they differ only in their concurrency). */
  readonly opts: WorkerOptions;
  /** Listen to a job event of every loop. */
  on<E extends JobEvent>(event: E, listener: WorkerListener<D, R>[E]): void;
  /** Stop listening (a listener given to {@link FetchLoopGroup.on}). */
  off<E extends JobEvent>(event: E, listener: WorkerListener<D, R>[E]): void;
  /** Start the loops built with `autorun: false`; resolves when they stop. */
  run(): Promise<void>;
  waitUntilReady(): Promise<void>;
  /**
   * Spread `limit` jobs in flight over the first `fetching` loops and park the others (they fetch nothing; their jobs
   * in progress run on). A parked loop comes back at a later call, unless the group is paused.
   */
  share(limit: number, fetching: number): void;
  /** How many loops fetch now, the first ones (the others are parked). A method: the group is spread into others. */
  fetching(): number;
  /**
   * Stop fetching; `doNotWaitActive` does not wait for the jobs in progress. `holder` names who holds the group (the
   * Redis OOM back-off, the merchant's pause): it fetches again only once every holder has resumed it.
   * @defaultValue holder 'caller'
   */
  pause(doNotWaitActive?: boolean, holder?: string): Promise<void>;
  /** `holder` lets go; once none holds the group, every loop that is not parked fetches again. */
  resume(holder?: string): Promise<void>;
  /** Whether `holder` holds the group (paused); without one, whether any does. */
  held(holder?: string): boolean;
  /** Abort one job's processor, in whichever loop runs it; false when none does. */
  cancelJob(jobId: string, reason?: string): boolean;
  cancelAllJobs(reason?: string): void;
  /** Stop every loop: waits for the jobs in progress unless `force`. */
  close(force?: boolean): Promise<void>;
  /** Drop the loops' connections now. */
  disconnect(): Promise<void>;
}

/** Own `loops` (at least one) as one {@link FetchLoopGroup}. */
export function groupFetchLoops<D, R>(loops: readonly [Worker<D, R>, ...Worker<D, R>[]]): FetchLoopGroup<D, R> {
  const all = async (act: (loop: Worker<D, R>, i: number) => Promise<unknown>) =>
    void (await Promise.all(loops.map(act)));
  // Who holds the group paused (pause() until their resume()): no loop fetches, no parked loop comes back meanwhile.
  const holders = new Set<string>();
  let fetching = loops.length;
  return {
    fetchLoops: loops,
    name: loops[0].name,
    opts: loops[0].opts,
    fetching: () => fetching,
    on: (event, listener) => loops.forEach((l) => l.on(event, listener)),
    off: (event, listener) => loops.forEach((l) => l.off(event, listener)),
    run: () => all((l) => l.run()),
    waitUntilReady: () => all((l) => l.waitUntilReady()),
    share(limit, wanted) {
      fetching = Math.min(loops.length, Math.max(1, Math.floor(wanted)));
      loops.forEach((l, i) => {
        if (i < fetching) {
          l.concurrency = shareOf(limit, fetching, i);
          if (holders.size === 0 && l.isPaused()) void l.resume();
        } else if (!l.isPaused()) void l.pause(true).catch(() => {});
      });
    },
    pause: async (doNotWaitActive, holder = 'caller') => {
      holders.add(holder);
      await all((l) => l.pause(doNotWaitActive));
    },
    resume: async (holder = 'caller') => {
      holders.delete(holder);
      if (holders.size > 0) return;
      await all((l, i) => (i < fetching ? l.resume() : Promise.resolve()));
    },
    held: (holder) => (holder === undefined ? holders.size > 0 : holders.has(holder)),
    cancelJob: (jobId, reason) => loops.some((l) => l.cancelJob(jobId, reason)),
    cancelAllJobs: (reason) => loops.forEach((l) => l.cancelAllJobs(reason)),
    close: (force) => all((l) => l.close(force)),
    disconnect: () => all((l) => l.disconnect()),
  };
}
