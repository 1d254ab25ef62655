import type { Worker } from 'bullmq';

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

/** Jobs in flight of fetch loop `i` of `n` when the process may run `total`: shares differ by at most one, none below 1. */
export function shareOf(total: number, n: number, i: number): number {
  return Math.max(1, Math.floor(total / n) + (i < total % n ? 1 : 0));
}

/** The job events of every fetch loop, seen on the first one. */
const FORWARDED = ['active', 'progress', 'completed', 'failed', 'stalled', 'error'] as const;

/** A BullMQ Worker that stands for itself and the other fetch loops of its process. */
export type FetchLoopGroup<W extends Worker> = W & {
  /** Every fetch loop, this one first; their concurrencies add up to the process's jobs in flight. */
  readonly fetchLoops: readonly W[];
};

/**
 * Make `first` stand for all `loops` (itself first): the other loops' job events are re-emitted on it, and its
 * lifecycle methods (run, waitUntilReady, pause, resume, cancelJob, cancelAllJobs, close, disconnect) act on every loop. With
 * a single loop it is returned as it is.
 */
export function groupFetchLoops<W extends Worker>(loops: readonly [W, ...W[]]): FetchLoopGroup<W> {
  const [first, ...others] = loops;
  const group = Object.assign(first, { fetchLoops: loops });
  if (others.length === 0) return group;
  for (const other of others) {
    for (const event of FORWARDED) {
      other.on(event, (...args: unknown[]) => (first.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args));
    }
  }
  const own = {
    run: first.run.bind(first),
    waitUntilReady: first.waitUntilReady.bind(first),
    pause: first.pause.bind(first),
    resume: first.resume.bind(first),
    cancelJob: first.cancelJob.bind(first),
    cancelAllJobs: first.cancelAllJobs.bind(first),
    close: first.close.bind(first),
    disconnect: first.disconnect.bind(first),
  };
  first.run = async () => void (await Promise.all([own.run(), ...others.map((o) => o.run())]));
  first.waitUntilReady = async () =>
    void (await Promise.all([own.waitUntilReady(), ...others.map((o) => o.waitUntilReady())]));
  first.pause = async (doNotWaitActive?: boolean) =>
    void (await Promise.all([own.pause(doNotWaitActive), ...others.map((o) => o.pause(doNotWaitActive))]));
  first.resume = async () => void (await Promise.all([own.resume(), ...others.map((o) => o.resume())]));
  first.cancelJob = (jobId: string, reason?: string) =>
    own.cancelJob(jobId, reason) || others.some((o) => o.cancelJob(jobId, reason));
  first.cancelAllJobs = (reason?: string) => {
    own.cancelAllJobs(reason);
    for (const o of others) o.cancelAllJobs(reason);
  };
  first.close = async (force?: boolean) =>
    void (await Promise.all([own.close(force), ...others.map((o) => o.close(force))]));
  first.disconnect = async () => void (await Promise.all([own.disconnect(), ...others.map((o) => o.disconnect())]));
  return group;
}
