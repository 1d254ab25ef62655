import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createHeldRows } from '../src/held-rows.ts';

describe('held rows', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('writes a row between half the wait and the wait, due rows in one run; a row taken back is never written', () => {
    const written: string[] = [];
    const rows = createHeldRows<string>(1000, (row) => written.push(row));
    rows.hold('a', 'a1');
    vi.advanceTimersByTime(300);
    rows.hold('b', 'b1');
    rows.hold('c', 'c1');
    expect(rows.take('c')).toBe('c1');
    expect(rows.take('c')).toBeUndefined();
    vi.advanceTimersByTime(699);
    expect(written).toEqual([]);
    // 1. At 1,000 ms 'a' is due; 'b' has waited 700 ms (more than half): it goes in the same run.
    vi.advanceTimersByTime(1);
    expect(written).toEqual(['a1', 'b1']);
    vi.advanceTimersByTime(5000);
    expect(written).toEqual(['a1', 'b1']);
  });

  it('a newer row of the same key replaces the held one and waits afresh', () => {
    const written: string[] = [];
    const rows = createHeldRows<string>(100, (row) => written.push(row));
    rows.hold('a', 'a1');
    vi.advanceTimersByTime(80);
    rows.hold('a', 'a2');
    vi.advanceTimersByTime(40);
    expect(written).toEqual([]);
    vi.advanceTimersByTime(60);
    expect(written).toEqual(['a2']);
  });

  it('release writes every held row at once; a wait of 0 writes at once', () => {
    const written: string[] = [];
    const rows = createHeldRows<string>(1000, (row) => written.push(row));
    rows.hold('a', 'a1');
    rows.hold('b', 'b1');
    rows.release();
    expect(written).toEqual(['a1', 'b1']);
    vi.advanceTimersByTime(2000);
    expect(written).toEqual(['a1', 'b1']);
    const now = createHeldRows<string>(0, (row) => written.push(row));
    now.hold('c', 'c1');
    expect(written).toEqual(['a1', 'b1', 'c1']);
    expect(vi.getTimerCount()).toBe(0);
  });
});
