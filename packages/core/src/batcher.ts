/**
 * Group calls made concurrently into one batch (group commit). A batch starts as soon as a slot is free: when the
 * batcher is idle a call runs alone at once (no added latency; with `gather: 'loop-turn'`, once this turn of the
 * event loop has read its input), and while a batch is in flight new calls gather and go together when it ends, up
 * to `maxBatch` each. Batches therefore grow with load and shrink to one when idle, with no timer. The same shape
 * as graphile-worker's `batch()` and Postgres' own group commit.
 */

/** One item's result inside a batch: its value, or the error that item alone failed with. */
export type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

/** Options of {@link Batcher}. */
export interface BatcherOptions {
  /** Largest number of items run together. @defaultValue 64 */
  maxBatch?: number;
  /** Batches run at once. @defaultValue 1 */
  maxInFlight?: number;
  /** Told the size of each batch as it starts (a metric). Must not throw. */
  onBatch?: (size: number) => void;
  /**
   * Which calls may join a batch that is about to start.
   * - `'microtask'`: those made in the same synchronous run (a burst of completions in one callback).
   * - `'loop-turn'`: those made in the same turn of the event loop. Node runs each socket's callback, and the
   *   microtasks after it, on its own, so requests whose bytes arrived together (one poll of the sockets) are
   *   separate runs; with `'microtask'` each of them would start a batch of its own while slots are free. The batch
   *   starts in the turn's check phase (`setImmediate`), after every socket of the poll has been read.
   * @defaultValue 'microtask'
   */
  gather?: 'microtask' | 'loop-turn';
}

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

export class Batcher<I, O> {
  readonly #run: (items: readonly I[]) => Promise<readonly Settled<O>[]>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #onBatch: ((size: number) => void) | undefined;
  readonly #defer: (run: () => void) => void;
  #pending: Pending<I, O>[] = [];
  #inFlight = 0;
  #scheduled = false;

  /**
   * @param run runs one batch and returns one result per item, in order; when it throws, every item of the batch
   *   fails with that error.
   */
  constructor(run: (items: readonly I[]) => Promise<readonly Settled<O>[]>, options: BatcherOptions = {}) {
    this.#run = run;
    this.#maxBatch = Math.max(1, options.maxBatch ?? 64);
    this.#maxInFlight = Math.max(1, options.maxInFlight ?? 1);
    this.#onBatch = options.onBatch;
    this.#defer = options.gather === 'loop-turn' ? (run) => void setImmediate(run) : (run) => queueMicrotask(run);
  }

  /** Items waiting for a batch (not counting those in flight). */
  get waiting(): number {
    return this.#pending.length;
  }

  /** Run `item` in the next batch; resolves or rejects with its own result. */
  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      this.#schedule();
    });
  }

  // Calls made in the same tick (or turn of the loop, see `gather`) join one batch.
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight) return;
    this.#scheduled = true;
    this.#defer(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#inFlight < this.#maxInFlight && this.#pending.length > 0) {
      const batch = this.#pending.splice(0, this.#maxBatch);
      this.#inFlight += 1;
      this.#onBatch?.(batch.length);
      void this.#runBatch(batch).finally(() => {
        this.#inFlight -= 1;
        if (this.#pending.length > 0) this.#schedule();
      });
    }
  }

  async #runBatch(batch: Pending<I, O>[]): Promise<void> {
    let results: readonly Settled<O>[];
    try {
      results = await this.#run(batch.map((p) => p.item));
      if (results.length !== batch.length)
        throw new Error(`batch returned ${results.length} results for ${batch.length} items`);
    } catch (e) {
      for (const p of batch) p.reject(e);
      return;
    }
    batch.forEach((p, i) => {
      const r = results[i]!;
      if (r.ok) p.resolve(r.value);
      else p.reject(r.error);
    });
  }
}

/**
 * Run one item through a batch function as a batch of one (what a caller without a {@link Batcher} does): its
 * value, or the error it alone failed with.
 */
export async function runAlone<I, O>(
  run: (items: readonly I[]) => Promise<readonly Settled<O>[]>,
  item: I,
): Promise<O> {
  const [result] = await run([item]);
  if (!result) throw new Error('a batch of one returned no result');
  if (!result.ok) throw result.error;
  return result.value;
}
