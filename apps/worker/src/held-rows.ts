/**
 * Rows that wait a while before they are written, and are not written at all when a newer row of the same key
 * takes their place first (the arrival recorder's `active` rows: a job that ends within the wait writes only its
 * outcome's row). One timer for all of them, unref'd. When it fires it writes every row already held for half the
 * wait or more, in one synchronous run (so a {@link Batcher} takes them as one batch): a row waits between half the
 * wait and all of it, and a steady stream of rows is written in a few large statements, not one per row.
 */

/** Rows waiting to be written, by key. */
export interface HeldRows<R> {
  /** Hold `row` under `key` for the wait, then write it (a row already held under `key` is replaced). */
  hold(key: string, row: R): void;
  /** Take back the row held under `key`, if any: it will not be written. */
  take(key: string): R | undefined;
  /** Write every held row now (the process is closing). */
  release(): void;
}

/**
 * Rows written through `write` half `waitMs` to `waitMs` after they were held, unless taken back first; 0 writes
 * them at once.
 */
export function createHeldRows<R>(waitMs: number, write: (row: R) => void): HeldRows<R> {
  const held = new Map<string, { row: R; due: number }>();
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    const first = held.values().next();
    if (timer || first.done) return;
    timer = setTimeout(writeDue, Math.max(0, first.value.due - Date.now())).unref();
  };
  const writeDue = () => {
    timer = undefined;
    const now = Date.now();
    for (const [key, { row, due }] of held) {
      if (due > now + waitMs / 2) break;
      held.delete(key);
      write(row);
    }
    arm();
  };
  return {
    hold(key, row) {
      if (waitMs <= 0) return write(row);
      held.delete(key); // a replaced row goes to the back, with its own wait
      held.set(key, { row, due: Date.now() + waitMs });
      arm();
    },
    take(key) {
      const entry = held.get(key);
      held.delete(key);
      return entry?.row;
    },
    release() {
      clearTimeout(timer);
      timer = undefined;
      const rows = [...held.values()];
      held.clear();
      for (const { row } of rows) write(row);
    },
  };
}
