import { describe, expect, it } from 'vitest';
import { Batcher } from '../src/batcher.ts';

interface Item {
  lane: string;
  n: number;
}

/** A batcher of items in lanes whose batches are recorded as `lane+n` lists; each batch takes a turn of the loop. */
function lanes(options: { maxBatch: number; weights?: Record<string, number> }) {
  const batches: string[][] = [];
  const batcher = new Batcher<Item, string>(
    async (items) => {
      batches.push(items.map((x) => `${x.lane}${x.n}`));
      await new Promise((resolve) => setImmediate(resolve));
      return items.map((x) => ({ ok: true as const, value: `${x.lane}${x.n}` }));
    },
    {
      maxBatch: options.maxBatch,
      laneOf: (x) => x.lane,
      weightOf: options.weights ? (lane) => options.weights![lane] ?? 1 : undefined,
    },
  );
  const submit = (lane: string, from: number, count: number) =>
    Array.from({ length: count }, (_, i) => batcher.submit({ lane, n: from + i }));
  return { batcher, batches, submit };
}

describe('the batcher shares each batch between lanes', () => {
  it('takes one item of each lane per turn: a lane queued behind a flood goes in the next batch', async () => {
    const { batches, submit } = lanes({ maxBatch: 4 });
    // 1. A floods; its first batch starts at once (the batcher was idle).
    const a = submit('a', 0, 1);
    await Promise.resolve();
    const flood = submit('a', 1, 99);
    // 2. B arrives behind 99 of A's items, while A's first batch is in flight.
    const b = submit('b', 0, 2);
    expect(await Promise.all(b)).toEqual(['b0', 'b1']);
    // B's items went in the batch right after the one in flight, alternating with A's.
    expect(batches.slice(0, 2)).toEqual([['a0'], ['a1', 'b0', 'a2', 'b1']]);
    await Promise.all([...a, ...flood]);
    // A alone again: it takes whole batches, in its own order.
    expect(batches[2]).toEqual(['a3', 'a4', 'a5', 'a6']);
    expect(batches.flat().filter((x) => x.startsWith('a'))).toEqual(Array.from({ length: 100 }, (_, i) => `a${i}`));
  });

  it('gives each lane its weight per turn, and keeps a turn that a full batch cut short for the next batch', async () => {
    const { batches, submit } = lanes({ maxBatch: 4, weights: { a: 3, b: 1 } });
    const first = submit('x', 0, 1); // keeps the batcher busy while the lanes fill
    await Promise.resolve();
    const all = [...submit('a', 0, 9), ...submit('b', 0, 3)];
    await Promise.all([...first, ...all]);
    expect(batches).toEqual([['x0'], ['a0', 'a1', 'a2', 'b0'], ['a3', 'a4', 'a5', 'b1'], ['a6', 'a7', 'a8', 'b2']]);
  });

  it('lets a lane of weight 1/2 take one item every second turn, and an idle lane take nothing', async () => {
    const { batches, submit } = lanes({ maxBatch: 3, weights: { slow: 0.5 } });
    const first = submit('x', 0, 1);
    await Promise.resolve();
    const all = [...submit('fast', 0, 4), ...submit('slow', 0, 2)];
    await Promise.all([...first, ...all]);
    // fast, slow (0.5: nothing), fast, slow (1: one item), fast, ...; once fast is done slow takes the rest.
    expect(batches).toEqual([['x0'], ['fast0', 'fast1', 'slow0'], ['fast2', 'fast3', 'slow1']]);
  });

  it('without lanes, takes items first in, first out', async () => {
    const batches: number[][] = [];
    const batcher = new Batcher<number, number>(
      async (items) => {
        batches.push([...items]);
        await new Promise((resolve) => setImmediate(resolve));
        return items.map((n) => ({ ok: true as const, value: n }));
      },
      { maxBatch: 3 },
    );
    const first = batcher.submit(0);
    await Promise.resolve();
    const rest = Array.from({ length: 7 }, (_, i) => batcher.submit(i + 1));
    expect(batcher.waiting).toBe(7);
    await Promise.all([first, ...rest]);
    expect(batches).toEqual([[0], [1, 2, 3], [4, 5, 6], [7]]);
    expect(batcher.waiting).toBe(0);
  });
});
