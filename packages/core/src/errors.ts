/**
 * The error catalogue: every failure the pipeline can name has a stable code here, with the HTTP status an app
 * answers it with and its retry class. Handlers, pages and the retry policy read both from here (no one keeps a list
 * of its own); docs/errors.md lists every code, and a test holds it to this catalogue both ways.
 */

/**
 * What retrying the same work can do about a failure.
 * - `transient`: it may succeed later (an outage, a timeout, a lock held); BullMQ's backoff retries it.
 * - `permanent`: it will fail the same way until a person fixes something (a setting, the data, a forgery).
 * - `client`: the request is refused as it was asked (a 4xx); the caller must change it.
 */
export type RetryClass = 'transient' | 'permanent' | 'client';

/** A code's entry in the catalogue. */
export interface ErrorSpec {
  /**
   * The status an app answers the code with. A `client` code may be answered with a more precise 4xx of the same
   * meaning (fastify's 413 and 415 are `REQUEST_INVALID`); 500 is a failure no client is told about (the console
   * answers it `INTERNAL_ERROR`, the ingest `fail`).
   */
  readonly status: number;
  /** The code's retry class; an {@link AppError}'s `transient` unless its thrower decides otherwise for one case. */
  readonly retry: RetryClass;
}

const client = (status: number): ErrorSpec => Object.freeze({ status, retry: 'client' });
const transient = (status: number): ErrorSpec => Object.freeze({ status, retry: 'transient' });
const permanent = (status = 500): ErrorSpec => Object.freeze({ status, retry: 'permanent' });

/** Every code, in sections; a new code goes into its section here and into docs/errors.md. */
const CATALOGUE = {
  // --- configuration and startup ---
  CONFIG_INVALID: permanent(),
  RUNTIME_NO_IMPLICIT_REJECTION: permanent(),
  /** Redis may lose acknowledged writes: ingest refuses to start, or answers a batch 503 (the platform retries). */
  REDIS_NOT_DURABLE: transient(503),
  /** Redis memory headroom is low (see readyz): ingest answers 503 until it is back. */
  REDIS_MEMORY_LOW: transient(503),
  /** Fewer Redis replicas online than INGEST_MIN_REPLICAS: ingest answers 503 until they are back. */
  REDIS_REPLICAS_OFFLINE: transient(503),
  KEY_FILE_INVALID: permanent(),

  // --- callback codec (ingest): one status for all of them, so that no failure tells a sender more (invariant 4) ---
  CALLBACK_BAD_REQUEST: client(400),
  CALLBACK_BASE64_INVALID: client(400),
  CALLBACK_CIPHERTEXT_LENGTH: client(400),
  CALLBACK_DECRYPT_FAILED: client(400),
  CALLBACK_JSON_INVALID: client(400),
  CALLBACK_SCHEMA_INVALID: client(400),
  CALLBACK_STATE_INVALID: client(400),
  CALLBACK_MERCHANT_MISMATCH: client(400),
  CALLBACK_KIND_MISMATCH: client(400),
  ENQUEUE_FAILED: transient(503),

  // --- platform API ---
  PLATFORM_TIMEOUT: transient(504),
  PLATFORM_UNREACHABLE: transient(503),
  /** Permanent for a 4xx; the platform client makes a 5xx, 408 or 429 transient. */
  PLATFORM_HTTP_ERROR: permanent(502),
  PLATFORM_ERROR_CODE: permanent(502),
  /** Permanent for a field missing from the envelope's data; transient when the reply is not the envelope at all. */
  PLATFORM_BAD_RESPONSE: permanent(502),
  PLATFORM_ABORTED: permanent(),
  PLATFORM_CIRCUIT_OPEN: transient(503),

  // --- verification (worker): permanent once waited out; an event still waiting throws them transient ---
  VERIFY_ORDER_UNKNOWN: permanent(),
  VERIFY_NOT_FINAL: permanent(),
  VERIFY_ORDER_NO_MISMATCH: permanent(),
  VERIFY_KIND_MISMATCH: permanent(),
  VERIFY_STATE_MISMATCH: permanent(),
  VERIFY_AMOUNT_MISMATCH: permanent(),
  VERIFY_OWN_AMOUNT_MISMATCH: permanent(),
  VERIFY_CURRENCY_MISMATCH: permanent(),
  VERIFY_CONFLICTING_FINAL_STATE: permanent(),
  VERIFY_MERCHANT_MISMATCH: permanent(),
  /**
   * A callback for a pair already applied (or an order already final) whose content differs from what was applied:
   * a forgery.
   */
  VERIFY_DIFFERS_FROM_APPLIED: permanent(),
  JOB_PAYLOAD_INVALID: permanent(),

  // --- database ---
  DB_UNAVAILABLE: transient(503),
  DB_MIGRATION_FAILED: permanent(),
  DB_SCHEMA_OUTDATED: permanent(),
  DB_QUERY_FAILED: permanent(),
  DB_COMMIT_IN_DOUBT: transient(500),

  // --- reconciliation (worker, console) ---
  /** Another sweep runs: the console answers 409; a scheduled sweep tries again later. */
  RECONCILE_IN_PROGRESS: transient(409),
  RECONCILE_UNAVAILABLE: transient(503),
  /** The merchant is paused (merchant_pauses): its sweep does not run until it is resumed; the console answers 409. */
  MERCHANT_PAUSED: client(409),
  /**
   * A paused merchant's backlog in Redis is past MERCHANT_PAUSED_MAX_BACKLOG: ingest answers its new callbacks 503
   * fail (the platform retries) until it is resumed and drained.
   */
  MERCHANT_BACKLOG_FULL: transient(503),

  // --- catalog and payouts ---
  CATALOG_UNAVAILABLE: transient(503),
  CURRENCY_NOT_ENABLED: client(422),
  MERCHANT_UNKNOWN: permanent(502),
  PAYOUT_INVALID: client(422),

  // --- console API ---
  UNAUTHORIZED: client(401),
  FORBIDDEN: client(403),
  REASON_REQUIRED: client(400),
  AUTH_RATE_LIMITED: client(429),
  NOT_FOUND: client(404),
  ORDER_CONFLICT: client(409),
  MERCHANT_REQUIRED: client(409),
  REQUEST_INVALID: client(400),
  REVIEW_NOT_OPEN: client(409),
  REPLAY_NOT_RUNNING: client(409),
  PLAN_STALE: client(409),
  JOB_NOT_FAILED: client(409),
  MERCHANT_ALREADY_PAUSED: client(409),
  MERCHANT_NOT_PAUSED: client(409),
  INTERNAL_ERROR: permanent(),
} as const satisfies Record<string, ErrorSpec>;

/** A stable error code: a key of the catalogue. */
export type ErrorCode = keyof typeof CATALOGUE;

/** The codes by name (`ErrorCodes.NOT_FOUND === 'NOT_FOUND'`), so a misspelt code does not compile. */
export const ErrorCodes: { readonly [C in ErrorCode]: C } = Object.freeze(
  Object.fromEntries(Object.keys(CATALOGUE).map((code) => [code, code])) as { [C in ErrorCode]: C },
);

/** The catalogue itself: each code's status and retry class. */
export const ERROR_CATALOGUE: Readonly<Record<ErrorCode, ErrorSpec>> = Object.freeze(CATALOGUE);

/** The status an app answers `code` with. */
export function statusOf(code: ErrorCode): number {
  return ERROR_CATALOGUE[code].status;
}

/** The retry class of `code`. */
export function retryClassOf(code: ErrorCode): RetryClass {
  return ERROR_CATALOGUE[code].retry;
}

/** Whether `code` refuses a request as it was asked (a 4xx): the caller is told why and can change it. */
export function isRefusal(code: ErrorCode): boolean {
  const status = statusOf(code);
  return status >= 400 && status < 500;
}

/** Options of an {@link AppError}. */
export interface AppErrorOptions {
  /** The underlying error, kept for logs; never sent to a client. */
  cause?: unknown;
  /** Structured, non-secret context for logs and reviews (order numbers, states, amounts). */
  details?: Record<string, unknown>;
  /**
   * Whether retrying the same work may succeed. @defaultValue the code's retry class is `transient`; a thrower
   * passes it only for a case that departs from its code's class (a platform 5xx, an event still waiting).
   */
  transient?: boolean;
}

/** An error with a stable code from {@link ErrorCodes}. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly transient: boolean;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.details = options.details;
    this.transient = options.transient ?? retryClassOf(code) === 'transient';
  }
}

export function isAppError(e: unknown, code?: ErrorCode): e is AppError {
  return e instanceof AppError && (code === undefined || e.code === code);
}

/** The first line of what was thrown (OpenSSL errors carry a multi-line trace after it). */
export function firstLineOf(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  const end = message.indexOf('\n');
  return end === -1 ? message : message.slice(0, end);
}

/** Normalise whatever was thrown into an Error, so every catch boundary can log it the same way. */
export function coerceError(e: unknown): Error {
  if (e instanceof Error) return e;
  if (typeof e === 'string') return new Error(e);
  try {
    return new Error(`non-error thrown: ${JSON.stringify(e)}`);
  } catch {
    return new Error(`non-error thrown: ${String(e)}`);
  }
}

/** How deep {@link causeChain} looks: wrappers rarely nest more than three deep. */
const MAX_CAUSES = 8;

/**
 * What was thrown, then its `cause`, its cause's cause, ...: at most eight, ending at a missing cause or at one seen
 * before (a cycle). The one walk of a cause chain: the retry policy, the database-down check, the lock-wait check
 * and the logger's serializer all judge an error by what it wraps.
 */
export function causeChain(e: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let cur = e; cur !== undefined && cur !== null && chain.length < MAX_CAUSES && !chain.includes(cur);) {
    chain.push(cur);
    cur = (cur as { cause?: unknown }).cause;
  }
  return chain;
}
