import { AppError, ErrorCodes } from '@mcb/core/errors';
import { PlatformCodeError } from '@mcb/core/platform';
import type { VerifyFailure } from './verify.ts';

/**
 * Whether Get order's failure is an answer that says nothing usable about the order, rather than an outage: the
 * platform refused (envelope code != 0, e.g. an order it does not know), answered HTTP 3xx/4xx (a proxy, a
 * maintenance page, a misrouted path, its "not found"), or answered code 0 with `data` null or missing a field (a
 * platform deploy, a replica that does not have the order yet, a "not found" convention). Its code, a sentence and
 * the facts; undefined for anything else (timeout, unreachable, 5xx, a reply that is not the envelope). A callback
 * waits on such an answer; the reconciliation sweep counts its order unknown and goes on, unless the failure is
 * transient (408 and 429 are: an outage may stop a sweep).
 */
export function unusableAnswer(error: unknown): Omit<VerifyFailure, 'retry'> | undefined {
  if (error instanceof PlatformCodeError) {
    return {
      code: ErrorCodes.PLATFORM_ERROR_CODE,
      reason: `Get order refused: ${error.platformCode} ${error.platformMessage}`.trim(),
      details: { platformCode: error.platformCode },
    };
  }
  if (!(error instanceof AppError)) return undefined;
  const status = error.code === ErrorCodes.PLATFORM_HTTP_ERROR ? Number(error.details?.status) : NaN;
  if (status >= 300 && status < 500) {
    return { code: ErrorCodes.PLATFORM_HTTP_ERROR, reason: `Get order answered HTTP ${status}`, details: { status } };
  }
  // The client marks a reply that is not the envelope (or over the size limit) transient: a fault of the path, an
  // outage. Permanent is the envelope with code 0 whose data is not an order.
  if (error.code === ErrorCodes.PLATFORM_BAD_RESPONSE && !error.transient) {
    return {
      code: ErrorCodes.PLATFORM_BAD_RESPONSE,
      reason: 'Get order answered code 0 without a usable order (data null or a field missing)',
      details: {},
    };
  }
  return undefined;
}
