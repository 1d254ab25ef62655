import { randomBytes } from 'node:crypto';
import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { RedisClient } from '@mcb/core/redis';

/** Extend the lock only while we still own it (our token); returns 1 when extended. */
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
/** Delete the lock only while we still own it, so a lapsed lock taken over by another sweep is left alone. */
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

/** A held sweep lock. */
export interface SweepLock {
  /** Aborts when the lock could not be renewed (lost to expiry or a Redis outage): stop sweeping. */
  readonly lost: AbortSignal;
  /** Stop renewing and delete the lock if it is still ours. Never throws. */
  release(): Promise<void>;
}

/** Options of {@link acquireSweepLock}. */
export interface SweepLockOptions {
  /** The lock's key, e.g. `{QUEUE_PREFIX}:maintenance:reconcile-lock`. */
  key: string;
  /** Time to live, in ms; renewed every third of it while held. A dead holder frees it after this long. @defaultValue 60000 */
  ttlMs?: number;
  logger?: Logger;
}

/**
 * Take the "one sweep at a time" lock: `SET key token NX PX ttl`, renewed while held. Returns undefined when
 * another holder has it. Redis errors on acquiring are thrown (nothing was taken).
 */
export async function acquireSweepLock(redis: RedisClient, options: SweepLockOptions): Promise<SweepLock | undefined> {
  const ttlMs = options.ttlMs ?? 60_000;
  const token = randomBytes(16).toString('hex');
  const ok = await redis.set(options.key, token, 'PX', ttlMs, 'NX');
  if (ok !== 'OK') return undefined;

  const lost = new AbortController();
  let renewing: Promise<unknown> = Promise.resolve();
  const timer = setInterval(
    () => {
      renewing = redis
        .eval(RENEW, 1, options.key, token, String(ttlMs))
        .then((extended) => {
          if (extended !== 1) throw new Error('the lock expired or was taken over');
        })
        .catch((e: unknown) => {
          clearInterval(timer);
          options.logger?.error(
            { err: coerceError(e), key: options.key },
            'reconciliation lock lost; stopping the sweep',
          );
          lost.abort(new Error('reconciliation lock lost'));
        });
    },
    Math.max(10, Math.floor(ttlMs / 3)),
  );
  timer.unref();

  return {
    lost: lost.signal,
    async release() {
      clearInterval(timer);
      await renewing;
      try {
        await redis.eval(RELEASE, 1, options.key, token);
      } catch (e) {
        // It expires on its own within ttlMs; the next sweep waits at most that long.
        options.logger?.warn({ err: coerceError(e), key: options.key }, 'could not release the reconciliation lock');
      }
    },
  };
}
