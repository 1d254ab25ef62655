import { AppError, ErrorCodes, causeChain, coerceError, firstLineOf } from '@mcb/core/errors';
import { scrubDatabaseMessage } from '@mcb/core/logger';
import { TRANSIENT_NETWORK_CODES } from '@mcb/core/spec';
import { UnrecoverableError } from 'bullmq';
import { DrizzleQueryError } from 'drizzle-orm';

/**
 * The one place that decides retry-or-give-up (STYLE 9). Transient failures are rethrown for BullMQ's backoff;
 * permanent ones become UnrecoverableError so the job fails at once, with the reason, and is kept for replay.
 */

export type ErrorClass = 'transient' | 'permanent';

/**
 * SQLSTATEs decided by what happened, not by their class alone. What a failover or switchover can answer is
 * transient: a demoted primary or a standby refuses writes (25006), a server shutting down or starting up ends or
 * refuses sessions (57P01-57P03, class 08), clients reconnecting at once exhaust connections (53300), reads on a
 * standby are cancelled by recovery (40001). The table, code by code, is in docs/worker.md ("Postgres errors").
 */
export const TRANSIENT_SQLSTATES: ReadonlySet<string> = new Set([
  '25006', // read-only transaction: a demoted primary or a standby; the pool reconnects (see discardsConnection)
  '25P03', // idle-in-transaction session timeout: the server ended the session
  '25P04', // transaction timeout (Postgres 17)
  '55006', // object in use
  '55P03', // lock not available (lock_timeout)
  '57000', // operator intervention
  '57014', // query cancelled (statement timeout, pg_cancel_backend)
  '57P01', // admin shutdown (pg_ctl stop -m fast, pg_terminate_backend, a switchover)
  '57P02', // crash shutdown (another backend crashed; the server restarts)
  '57P03', // cannot connect now: starting up, shutting down, in recovery
  '57P05', // idle session timeout: the server ended the session
  '58000', // system error
  '58030', // I/O error
]);
/** Whole SQLSTATE classes: 08 connection exception, 53 insufficient resources (too many connections, disk full, out of memory). */
export const TRANSIENT_SQLSTATE_CLASSES: ReadonlySet<string> = new Set(['08', '53']);
/** Class 40, transaction rollback (serialization failure, deadlock, completion unknown), but for 40002, a deferred constraint. */
const TRANSIENT_ROLLBACK = /^40(?!002)/;
/**
 * SQLSTATEs after which the connection is not used again: the session points at a server that refuses writes
 * (25006: a demoted primary, or a session that began while the database was read-only keeps that default), or the
 * server has ended it. Releasing the client with the error makes the pool close it; the next attempt opens a new
 * one, through PgBouncer or DNS, to whichever server is the primary by then.
 */
const DISCARD_SQLSTATES = new Set(['25006', '25P03', '25P04', '57P01', '57P02', '57P03', '57P05']);
/** node-postgres reports a lost or unobtainable connection with plain Errors carrying these messages. */
const CONNECTION_LOST = new RegExp(
  [
    'Connection terminated',
    'timeout exceeded when trying to connect',
    'not queryable',
    'Client was closed',
    'socket hang up',
    'read ECONNRESET',
    'connect ECONNREFUSED',
  ].join('|'),
  'i',
);
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * Whether retrying the same work may succeed. AppErrors carry their code's retry class from the error catalogue
 * (or their thrower's decision for a case that departs from it, such as a platform 5xx); Postgres and socket errors
 * are judged by code; an unknown error is transient (nothing was committed, and retrying is safe under the dedup
 * constraint) except for programming errors (TypeError and kin), which no retry will fix.
 */
export function classifyError(e: unknown): ErrorClass {
  for (const cur of causeChain(e)) {
    if (cur instanceof UnrecoverableError) return 'permanent';
    if (cur instanceof AppError) return cur.transient ? 'transient' : 'permanent';
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (TRANSIENT_NETWORK_CODES.has(code)) return 'transient';
      if (SQLSTATE.test(code)) {
        const transient =
          TRANSIENT_SQLSTATES.has(code) ||
          TRANSIENT_SQLSTATE_CLASSES.has(code.slice(0, 2)) ||
          TRANSIENT_ROLLBACK.test(code);
        return transient ? 'transient' : 'permanent';
      }
    }
    if (cur instanceof Error && CONNECTION_LOST.test(cur.message)) return 'transient';
  }
  if (e instanceof TypeError || e instanceof ReferenceError || e instanceof SyntaxError || e instanceof RangeError) {
    return 'permanent';
  }
  return 'transient';
}

/**
 * Whether the connection that answered `e` must be closed rather than returned to the pool (see
 * DISCARD_SQLSTATES): the server refused writes, ended the session, or the connection itself failed.
 */
export function discardsConnection(e: unknown): boolean {
  for (const cur of causeChain(e)) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string' && SQLSTATE.test(code)) return DISCARD_SQLSTATES.has(code) || code.startsWith('08');
    if (typeof code === 'string' && TRANSIENT_NETWORK_CODES.has(code)) return true;
    if (cur instanceof Error && CONNECTION_LOST.test(cur.message)) return true;
  }
  return false;
}

/** Server states that refuse or end every session: shutting down, crashed, starting up; too many connections. */
const SERVER_DOWN_SQLSTATES: ReadonlySet<string> = new Set(['57P01', '57P02', '57P03', '53300']);

/**
 * Whether `e` says the database is not there right now (no connection could be had, or the one in use was lost),
 * rather than that a statement failed: the connection-level part of what {@link classifyError} calls transient.
 * The console answers these `503 DB_UNAVAILABLE`.
 */
export function isDatabaseDown(e: unknown): boolean {
  return causeChain(e).some((cur) => {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (TRANSIENT_NETWORK_CODES.has(code) || SERVER_DOWN_SQLSTATES.has(code)) return true;
      if (SQLSTATE.test(code) && code.startsWith('08')) return true;
    }
    return cur instanceof Error && CONNECTION_LOST.test(cur.message);
  });
}

/**
 * A copy of a driver error that is safe to store in Redis and show on the dashboard: drizzle's query errors carry
 * the SQL parameters (decrypted record fields), so only the driver's own message and SQLSTATE are kept.
 */
function sanitize(err: Error, kind: ErrorClass): Error {
  const chain = causeChain(err);
  const wrapped = chain.some((c) => c instanceof DrizzleQueryError);
  const root = chain.at(-1);
  const sqlstate = (root as { code?: unknown }).code;
  const hasSqlstate = typeof sqlstate === 'string' && SQLSTATE.test(sqlstate);
  if (!wrapped && !hasSqlstate) return err;
  const message = `${hasSqlstate ? `${sqlstate} ` : ''}${root instanceof Error ? scrubDatabaseMessage(root.message) : 'query failed'}`;
  return kind === 'transient'
    ? new AppError(ErrorCodes.DB_UNAVAILABLE, message)
    : new AppError(ErrorCodes.DB_QUERY_FAILED, message);
}

/**
 * A permanent failure: BullMQ fails the job at once (no retry) and keeps it for replay. The reason is an
 * error carried as `cause` (an {@link AppError}, or the programming error no retry fixes); the message
 * (`CODE: reason`) is what the dashboard shows.
 */
export function giveUp(reason: Error): UnrecoverableError {
  const err = new UnrecoverableError(`${reason instanceof AppError ? reason.code : reason.name}: ${reason.message}`);
  err.cause = reason;
  return err;
}

/** The code a job error stands for: its AppError's (itself or the give-up's cause), else the error's name. */
export function jobErrorCode(err: Error): string {
  if (err instanceof AppError) return err.code;
  if (err instanceof UnrecoverableError && err.cause instanceof Error) return jobErrorCode(err.cause);
  return err.name;
}

/**
 * What the processor throws for a failure: transient errors as they are (BullMQ retries them with the backoff),
 * permanent ones as {@link giveUp} (the job fails at once and is kept for replay), the AppError as its cause.
 */
export function toJobError(e: unknown): Error {
  const err = coerceError(e);
  if (err instanceof UnrecoverableError) return err;
  const kind = classifyError(err);
  const safe = err instanceof AppError ? err : sanitize(err, kind);
  if (kind === 'transient') return safe;
  return giveUp(safe);
}

/** Options of {@link callbackBackoffDelay}. */
export interface BackoffOptions {
  /** Scale of the first retry, in ms. @defaultValue 1000 */
  baseMs?: number;
  /** Largest delay between two attempts, in ms. @defaultValue 600000 (10 minutes) */
  capMs?: number;
  /** Source of randomness in [0, 1); tests pass a fixed one. @defaultValue Math.random */
  random?: () => number;
}

/**
 * The CALLBACK_BACKOFF strategy: exponential with full jitter, capped: `min(cap, random(0, base * 2^(n-1)))`.
 * Early retries are spread widely (no thundering herd after a blip); once `base * 2^(n-1)` is far above the cap,
 * almost every draw is the cap, so 60 attempts span about 8 hours: long enough to ride out an outage of Postgres
 * or the platform. `attemptsMade` is 1 after the first failure.
 */
export function callbackBackoffDelay(attemptsMade: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 1000;
  const cap = options.capMs ?? 600_000;
  const random = options.random ?? Math.random;
  const exponent = Math.min(Math.max(attemptsMade, 1) - 1, 40);
  return Math.round(Math.min(cap, random() * base * 2 ** exponent));
}

/**
 * `CODE: reason` for a person (a job's timeline, a log line), the code said once: a give-up's message already starts
 * with it, and prefixing it again printed `DB_QUERY_FAILED: DB_QUERY_FAILED: 42P01 ...`.
 */
export function describeJobError(err: Error): string {
  const code = jobErrorCode(err);
  const line = firstLineOf(err);
  return line.startsWith(`${code}: `) ? line : `${code}: ${line}`;
}
