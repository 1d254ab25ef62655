/**
 * The error catalogue: every failure the pipeline can name has a stable code here.
 * Codes are part of the operator-facing contract (logs, reviews, API errors); see docs/errors.md.
 */

export const ErrorCodes = {
  // --- configuration and startup ---
  CONFIG_INVALID: 'CONFIG_INVALID',
  RUNTIME_NO_IMPLICIT_REJECTION: 'RUNTIME_NO_IMPLICIT_REJECTION',
  REDIS_NOT_DURABLE: 'REDIS_NOT_DURABLE',
  KEY_FILE_INVALID: 'KEY_FILE_INVALID',

  // --- callback codec (ingest) ---
  CALLBACK_BAD_REQUEST: 'CALLBACK_BAD_REQUEST',
  CALLBACK_BASE64_INVALID: 'CALLBACK_BASE64_INVALID',
  CALLBACK_CIPHERTEXT_LENGTH: 'CALLBACK_CIPHERTEXT_LENGTH',
  CALLBACK_DECRYPT_FAILED: 'CALLBACK_DECRYPT_FAILED',
  CALLBACK_JSON_INVALID: 'CALLBACK_JSON_INVALID',
  CALLBACK_SCHEMA_INVALID: 'CALLBACK_SCHEMA_INVALID',
  CALLBACK_STATE_INVALID: 'CALLBACK_STATE_INVALID',
  CALLBACK_MERCHANT_MISMATCH: 'CALLBACK_MERCHANT_MISMATCH',
  CALLBACK_KIND_MISMATCH: 'CALLBACK_KIND_MISMATCH',
  ENQUEUE_FAILED: 'ENQUEUE_FAILED',

  // --- platform API ---
  PLATFORM_TIMEOUT: 'PLATFORM_TIMEOUT',
  PLATFORM_UNREACHABLE: 'PLATFORM_UNREACHABLE',
  PLATFORM_HTTP_ERROR: 'PLATFORM_HTTP_ERROR',
  PLATFORM_ERROR_CODE: 'PLATFORM_ERROR_CODE',
  PLATFORM_BAD_RESPONSE: 'PLATFORM_BAD_RESPONSE',
  PLATFORM_ABORTED: 'PLATFORM_ABORTED',
  PLATFORM_CIRCUIT_OPEN: 'PLATFORM_CIRCUIT_OPEN',

  // --- verification (worker) ---
  VERIFY_ORDER_UNKNOWN: 'VERIFY_ORDER_UNKNOWN',
  VERIFY_NOT_FINAL: 'VERIFY_NOT_FINAL',
  VERIFY_ORDER_NO_MISMATCH: 'VERIFY_ORDER_NO_MISMATCH',
  VERIFY_KIND_MISMATCH: 'VERIFY_KIND_MISMATCH',
  VERIFY_STATE_MISMATCH: 'VERIFY_STATE_MISMATCH',
  VERIFY_AMOUNT_MISMATCH: 'VERIFY_AMOUNT_MISMATCH',
  VERIFY_OWN_AMOUNT_MISMATCH: 'VERIFY_OWN_AMOUNT_MISMATCH',
  VERIFY_CURRENCY_MISMATCH: 'VERIFY_CURRENCY_MISMATCH',
  VERIFY_CONFLICTING_FINAL_STATE: 'VERIFY_CONFLICTING_FINAL_STATE',
  VERIFY_MERCHANT_MISMATCH: 'VERIFY_MERCHANT_MISMATCH',
  /** A callback for a pair already applied (or an order already final) whose content differs from what was applied: a forgery. */
  VERIFY_DIFFERS_FROM_APPLIED: 'VERIFY_DIFFERS_FROM_APPLIED',
  JOB_PAYLOAD_INVALID: 'JOB_PAYLOAD_INVALID',

  // --- database ---
  DB_UNAVAILABLE: 'DB_UNAVAILABLE',
  DB_MIGRATION_FAILED: 'DB_MIGRATION_FAILED',
  DB_SCHEMA_OUTDATED: 'DB_SCHEMA_OUTDATED',
  DB_QUERY_FAILED: 'DB_QUERY_FAILED',
  DB_COMMIT_IN_DOUBT: 'DB_COMMIT_IN_DOUBT',

  // --- reconciliation (worker, console) ---
  RECONCILE_IN_PROGRESS: 'RECONCILE_IN_PROGRESS',
  RECONCILE_UNAVAILABLE: 'RECONCILE_UNAVAILABLE',

  // --- catalog and payouts ---
  CATALOG_UNAVAILABLE: 'CATALOG_UNAVAILABLE',
  CURRENCY_NOT_ENABLED: 'CURRENCY_NOT_ENABLED',
  MERCHANT_UNKNOWN: 'MERCHANT_UNKNOWN',
  PAYOUT_INVALID: 'PAYOUT_INVALID',

  // --- console API ---
  UNAUTHORIZED: 'UNAUTHORIZED',
  FORBIDDEN: 'FORBIDDEN',
  REASON_REQUIRED: 'REASON_REQUIRED',
  AUTH_RATE_LIMITED: 'AUTH_RATE_LIMITED',
  NOT_FOUND: 'NOT_FOUND',
  ORDER_CONFLICT: 'ORDER_CONFLICT',
  REQUEST_INVALID: 'REQUEST_INVALID',
  REVIEW_NOT_OPEN: 'REVIEW_NOT_OPEN',
  REPLAY_NOT_RUNNING: 'REPLAY_NOT_RUNNING',
  JOB_NOT_FAILED: 'JOB_NOT_FAILED',
  INTERNAL_ERROR: 'INTERNAL_ERROR',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** Options of an {@link AppError}. */
export interface AppErrorOptions {
  /** The underlying error, kept for logs; never sent to a client. */
  cause?: unknown;
  /** Structured, non-secret context for logs and reviews (order numbers, states, amounts). */
  details?: Record<string, unknown>;
  /** Whether retrying the same work may succeed. Decided by the code's owner; see worker/retry policy. */
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
    this.transient = options.transient ?? false;
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
