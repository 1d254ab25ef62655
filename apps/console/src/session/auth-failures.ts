/**
 * Failed authentication, counted per client address and globally in fixed windows. An address with `perAddress`
 * failures in a window is locked until the window ends: every authentication attempt from it (login, bearer,
 * session) is answered `429` with `Retry-After`, even one with the right token. Beyond `global` failures in a
 * window from all addresses together, failing attempts get `429` instead of `401` (a distributed guesser learns
 * nothing more), while a valid credential from an unlocked address still passes. Only attempts that present a
 * credential count: a browser opening a page without a session is not guessing anything.
 *
 * In memory, per console process: the console is an internal service with one or a few instances, and the token is
 * a random secret of at least 16 characters, so the limit is there to stop noise and log floods, not to make a
 * guessable secret safe.
 */
export interface AuthFailureLimits {
  /** Failures from one address within the window that lock it. */
  perAddress: number;
  /** Failures from all addresses within the window beyond which failures get 429. */
  global: number;
  /** Window length, in ms. */
  windowMs: number;
}

interface Window {
  count: number;
  endsAt: number;
}

/**
 * Most addresses tracked at once; beyond it expired windows are dropped, then the oldest (the map keeps insertion
 * order).
 */
const MAX_TRACKED = 10_000;

export interface AuthFailureLimiter {
  readonly limits: AuthFailureLimits;
  /** Milliseconds until `address` may try again; 0 when it is not locked. */
  lockedFor(address: string, now?: number): number;
  /** Count one failure; says whether this failure locked the address (to log the lock-out once). */
  fail(address: string, now?: number): { lockedNow: boolean; retryAfterMs: number; globalExceeded: boolean };
}

export function createAuthFailureLimiter(limits: AuthFailureLimits): AuthFailureLimiter {
  const byAddress = new Map<string, Window>();
  let global: Window = { count: 0, endsAt: 0 };

  const current = (address: string, now: number): Window | undefined => {
    const w = byAddress.get(address);
    if (w && w.endsAt <= now) {
      byAddress.delete(address);
      return undefined;
    }
    return w;
  };
  const prune = (now: number) => {
    if (byAddress.size < MAX_TRACKED) return;
    for (const [address, w] of byAddress) if (w.endsAt <= now) byAddress.delete(address);
    for (const address of byAddress.keys()) {
      if (byAddress.size < MAX_TRACKED) break;
      byAddress.delete(address);
    }
  };

  return {
    limits,
    lockedFor(address, now = Date.now()) {
      const w = current(address, now);
      return w && w.count >= limits.perAddress ? w.endsAt - now : 0;
    },
    fail(address, now = Date.now()) {
      let w = current(address, now);
      if (!w) {
        prune(now);
        w = { count: 0, endsAt: now + limits.windowMs };
        byAddress.set(address, w);
      }
      w.count++;
      if (global.endsAt <= now) global = { count: 0, endsAt: now + limits.windowMs };
      global.count++;
      return {
        lockedNow: w.count === limits.perAddress,
        retryAfterMs: w.count >= limits.perAddress ? w.endsAt - now : global.endsAt - now,
        globalExceeded: global.count > limits.global,
      };
    },
  };
}

/** `Retry-After` in whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number): string => String(Math.max(1, Math.ceil(ms / 1000)));
