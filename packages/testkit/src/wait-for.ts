/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Give up after this many ms. @defaultValue 10000 */
  timeoutMs?: number;
  /** Poll interval in ms. @defaultValue 25 */
  intervalMs?: number;
  /** Said in the error when the deadline passes. */
  message?: string;
}

/**
 * Poll `check` until it returns a value other than `undefined`/`false`, or throw at the deadline with the last
 * value or error seen. A poll with a deadline, never a blind sleep.
 */
export async function waitFor<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  options: WaitForOptions = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      last = value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      const why = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(
        `${options.message ?? 'condition not met'} within ${options.timeoutMs ?? 10_000} ms (last: ${why})`,
      );
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25));
  }
}
