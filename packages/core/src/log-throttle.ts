import type { Logger } from 'pino';

/**
 * Logs at most one line per key and interval. A failure that repeats (Redis refusing every reconnect, a script
 * refused with OOM) would otherwise write a line per attempt: during exactly the incident someone is reading the
 * logs for, they bury the one line that matters and cost money in the log pipeline.
 */
export interface LogThrottle {
  /**
   * Log `message` at `level` under `key`, unless a line for `key` went out less than the interval ago. The line
   * carries `errorsSinceLastLine`: how many times this key was seen since its previous line, this one included.
   * Returns whether a line was written.
   */
  (key: string, level: 'warn' | 'error', fields: Record<string, unknown>, message: string): boolean;
}

/** Options of {@link createLogThrottle}. */
export interface LogThrottleOptions {
  /** Shortest time between two lines of one key, in ms. @defaultValue 10000 */
  intervalMs?: number;
  /** The clock; tests pass their own. @defaultValue Date.now */
  now?: () => number;
}

/** A {@link LogThrottle} writing to `logger`; the first occurrence of a key is logged at once. */
export function createLogThrottle(logger: Logger, options: LogThrottleOptions = {}): LogThrottle {
  const intervalMs = options.intervalMs ?? 10_000;
  const now = options.now ?? Date.now;
  const keys = new Map<string, { lastLine: number; seen: number }>();
  return (key, level, fields, message) => {
    const state = keys.get(key) ?? { lastLine: -Infinity, seen: 0 };
    keys.set(key, state);
    state.seen++;
    const t = now();
    if (t - state.lastLine < intervalMs) return false;
    logger[level]({ ...fields, errorsSinceLastLine: state.seen }, message);
    state.lastLine = t;
    state.seen = 0;
    return true;
  };
}
