import { describe, expect, it } from 'vitest';
import { Batcher, type BatcherOptions } from '../src/batcher.ts';

/** A batcher whose batches take one turn of the loop to run, and the sizes of the batches it started. */
function recording(options: BatcherOptions) {
  const sizes: number[] = [];
  const batcher = new Batcher<number, number>(
    async (items) => {
      await new Promise((resolve) => setImmediate(resolve));
      return items.map((n) => ({ ok: true as const, value: n * 2 }));
    },
    { ...options, onBatch: (size) => sizes.push(size) },
  );
  return { batcher, sizes };
}

/** Calls made from separate callbacks of one turn of the event loop, as requests read in one poll of the sockets are. */
function fromSeparateCallbacks(batcher: Batcher<number, number>, count: number): Promise<number>[] {
  return Array.from(
    { length: count },
    (_, i) => new Promise<number>((resolve, reject) => setImmediate(() => batcher.submit(i).then(resolve, reject))),
  );
}

describe('the batcher gathers calls', () => {
  it("'loop-turn': calls from separate callbacks of one turn go as one batch, and each gets its own result", async () => {
    const { batcher, sizes } = recording({ maxInFlight: 4, gather: 'loop-turn' });
    expect(await Promise.all(fromSeparateCallbacks(batcher, 10))).toEqual(Array.from({ length: 10 }, (_, i) => i * 2));
    expect(sizes).toEqual([10]);
  });

  it("'microtask' (the default): each such call starts a batch of its own while slots are free", async () => {
    const { batcher, sizes } = recording({ maxInFlight: 4 });
    expect(await Promise.all(fromSeparateCallbacks(batcher, 10))).toEqual(Array.from({ length: 10 }, (_, i) => i * 2));
    // Four slots: the first four calls run alone, the other six gather behind them.
    expect(sizes.slice(0, 4)).toEqual([1, 1, 1, 1]);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(10);
  });

  it("'loop-turn': an idle batcher runs a lone call in the same turn, and calls made while it runs join the next batch", async () => {
    const { batcher, sizes } = recording({ maxInFlight: 1, gather: 'loop-turn' });
    const first = batcher.submit(1);
    await new Promise((resolve) => setImmediate(resolve)); // queued after the batcher's own: the batch has started
    expect(sizes).toEqual([1]);
    const later = [batcher.submit(2), batcher.submit(3)];
    expect(await Promise.all([first, ...later])).toEqual([2, 4, 6]);
    expect(sizes).toEqual([1, 2]);
  });

  it("'loop-turn': a batch that fails fails every call of it, and the next batch runs", async () => {
    let calls = 0;
    const batcher = new Batcher<number, number>(
      async (items) => {
        if (calls++ === 0) throw new Error('Redis refused the batch');
        return items.map((n) => ({ ok: true as const, value: n }));
      },
      { gather: 'loop-turn' },
    );
    const settled = await Promise.allSettled(fromSeparateCallbacks(batcher, 3));
    expect(settled.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(settled[0]).toMatchObject({ reason: { message: 'Redis refused the batch' } });
    expect(await batcher.submit(7)).toBe(7);
  });
});
