/**
 * Group calls made concurrently into one batch (group commit). A batch starts as soon as a slot is free: when the
 * batcher is idle a call runs alone at once (no added latency; with `gather: 'loop-turn'`, once this turn of the
 * event loop has read its input), and while a batch is in flight new calls gather and go together when it ends, up
 * to `maxBatch` each. Batches therefore grow with load and shrink to one when idle, with no timer. The same shape
 * as graphile-worker's `batch()` and Postgres' own group commit.
 *
 * Items may belong to lanes (`laneOf`: a merchant). Each lane waits in its own queue, and a batch is filled
 * round-robin across the lanes that have items, `weightOf(lane)` items per turn (deficit round-robin), so one lane's
 * flood makes another lane's item wait behind at most one batch of it (at equal weights). A lane alone takes the
 * whole batch, and an idle lane takes nothing (work-conserving).
 */

/** One item's result inside a batch: its value, or the error that item alone failed with. */
export type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

/** Options of {@link Batcher}. */
export interface BatcherOptions<I = unknown> {
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
  /** The lane of an item (its merchant): batches are filled round-robin across lanes. @defaultValue one lane */
  laneOf?: (item: I) => string;
  /**
   * A lane's share under contention: items taken from it per turn of the round-robin (a positive number; a
   * fraction takes one item every few turns). @defaultValue 1
   */
  weightOf?: (lane: string) => number;
}

interface Pending<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

/** One lane's waiting items (first in, first out) and its share left in the current turn. */
class Lane<I, O> {
  #items: Pending<I, O>[] = [];
  #head = 0;
  /** Items it may still take in its turn (deficit round-robin). */
  deficit = 0;
  inTurn = false;

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(p: Pending<I, O>): void {
    this.#items.push(p);
  }

  /** Move up to `n` items into `batch`. */
  takeInto(batch: Pending<I, O>[], n: number): void {
    for (let k = 0; k < n; k++) batch.push(this.#items[this.#head++]!);
    // Drop the taken head now and then: O(1) per item, without shifting a long flood on every take.
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}

export class Batcher<I, O> {
  readonly #run: (items: readonly I[]) => Promise<readonly Settled<O>[]>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #onBatch: ((size: number) => void) | undefined;
  readonly #defer: (run: () => void) => void;
  readonly #laneOf: ((item: I) => string) | undefined;
  readonly #weightOf: ((lane: string) => number) | undefined;
  /** Lanes with waiting items, in turn order: the first is served next. */
  readonly #lanes = new Map<string, Lane<I, O>>();
  #waiting = 0;
  #inFlight = 0;
  #scheduled = false;

  /**
   * @param run runs one batch and returns one result per item, in order; when it throws, every item of the batch
   *   fails with that error.
   */
  constructor(run: (items: readonly I[]) => Promise<readonly Settled<O>[]>, options: BatcherOptions<I> = {}) {
    this.#run = run;
    this.#maxBatch = Math.max(1, options.maxBatch ?? 64);
    this.#maxInFlight = Math.max(1, options.maxInFlight ?? 1);
    this.#onBatch = options.onBatch;
    this.#defer = options.gather === 'loop-turn' ? (run) => void setImmediate(run) : (run) => queueMicrotask(run);
    this.#laneOf = options.laneOf;
    this.#weightOf = options.weightOf;
  }

  /** Items waiting for a batch (not counting those in flight). */
  get waiting(): number {
    return this.#waiting;
  }

  /** Run `item` in the next batch its lane's turn reaches; resolves or rejects with its own result. */
  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      const key = this.#laneOf ? this.#laneOf(item) : '';
      let lane = this.#lanes.get(key);
      if (!lane) {
        lane = new Lane<I, O>();
        this.#lanes.set(key, lane);
      }
      lane.push({ item, resolve, reject });
      this.#waiting += 1;
      this.#schedule();
    });
  }

  #weight(lane: string): number {
    const w = this.#weightOf?.(lane) ?? 1;
    return Number.isFinite(w) && w > 0 ? w : 1;
  }

  /** The next batch: round-robin across the lanes, each taking its weight per turn (deficit round-robin). */
  #take(): Pending<I, O>[] {
    const batch: Pending<I, O>[] = [];
    while (batch.length < this.#maxBatch) {
      const next = this.#lanes.entries().next();
      if (next.done) break;
      const [key, lane] = next.value;
      const room = this.#maxBatch - batch.length;
      if (this.#lanes.size === 1) {
        // Alone: no one to share with (work-conserving).
        lane.takeInto(batch, Math.min(room, lane.size));
        lane.deficit = 0;
        lane.inTurn = false;
      } else {
        if (!lane.inTurn) {
          lane.deficit += this.#weight(key);
          lane.inTurn = true;
        }
        const n = Math.min(Math.floor(lane.deficit), lane.size, room);
        lane.takeInto(batch, n);
        lane.deficit -= n;
        // The batch is full in the middle of this lane's turn: it keeps its place and what is left of its share.
        if (lane.size > 0 && lane.deficit >= 1) continue;
        lane.inTurn = false;
        this.#lanes.delete(key);
        if (lane.size > 0) this.#lanes.set(key, lane); // its turn is over: to the back of the round
        continue;
      }
      if (lane.size === 0) this.#lanes.delete(key);
    }
    this.#waiting -= batch.length;
    return batch;
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
    while (this.#inFlight < this.#maxInFlight && this.#waiting > 0) {
      const batch = this.#take();
      this.#inFlight += 1;
      this.#onBatch?.(batch.length);
      void this.#runBatch(batch).finally(() => {
        this.#inFlight -= 1;
        if (this.#waiting > 0) this.#schedule();
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
