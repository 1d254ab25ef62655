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
 */

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
  /** Stop fetching; `doNotWaitActive` does not wait for the jobs in progress. */
  pause(doNotWaitActive?: boolean): Promise<void>;
  resume(): Promise<void>;
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
  const all = async (act: (loop: Worker<D, R>) => Promise<unknown>) => void (await Promise.all(loops.map(act)));
  return {
    fetchLoops: loops,
    name: loops[0].name,
    opts: loops[0].opts,
    on: (event, listener) => loops.forEach((l) => l.on(event, listener)),
    off: (event, listener) => loops.forEach((l) => l.off(event, listener)),
    run: () => all((l) => l.run()),
    waitUntilReady: () => all((l) => l.waitUntilReady()),
    pause: (doNotWaitActive) => all((l) => l.pause(doNotWaitActive)),
    resume: () => all((l) => l.resume()),
    cancelJob: (jobId, reason) => loops.some((l) => l.cancelJob(jobId, reason)),
    cancelAllJobs: (reason) => loops.forEach((l) => l.cancelAllJobs(reason)),
    close: (force) => all((l) => l.close(force)),
    disconnect: () => all((l) => l.disconnect()),
  };
}
