import { parse as parseLossless } from 'lossless-json';
import { z } from 'zod';
import { CALLBACK_KINDS } from '../spec.ts';
import { AppError, ErrorCodes } from '../errors.ts';
import { normalizeDecimal } from '../money.ts';
import type { PlatformHttp } from './http.ts';

/**
 * Get order: THE adapter for the one platform operation the spec names but does not show. Everything we assume
 * about it (path, body, reply shape) lives in this file, so it can be changed in one place when the real shape
 * is known (docs/platform-interface.md, "Get order").
 */

/** Default path of Get order under `{base_url}` (`PLATFORM_GET_ORDER_PATH`). */
export const GET_ORDER_PATH = '/api/open/order/getOrder';

/** Parameters of {@link getOrder}. */
export interface GetOrderParams {
  /** Our merchant number. */
  merchantNo: string;
  /** Our own order number (callbacks' `MerchantOrderNo`). */
  merchantOrderNo: string;
  /** @defaultValue {@link GET_ORDER_PATH} */
  path?: string;
}

/**
 * JSON numbers stay exact: an integer that fits a double becomes a number (envelope `code`, `state`); any other
 * numeric literal is kept as its source text, so an amount like 12345678901234567.89 never passes through a float.
 */
export function parseJsonExact(text: string): unknown {
  return parseLossless(text, null, (literal) =>
    /^-?\d+$/.test(literal) && Number.isSafeInteger(Number(literal)) ? Number(literal) : literal,
  );
}

const amountSchema = z.union([z.string(), z.number()]).transform((v, ctx) => {
  try {
    const text = normalizeDecimal(String(v));
    if (text.startsWith('-')) throw new RangeError('negative');
    return text;
  } catch {
    ctx.addIssue({ code: 'custom', message: 'expected a non-negative decimal amount' });
    return z.NEVER;
  }
});

/** An order as Get order reports it. The platform is the authority on `state` and `amount`. */
export const platformOrderSchema = z.object({
  /** The platform's order number (callbacks' `OrderNo`). */
  orderNo: z.union([z.string().min(1), z.number().int()]).transform(String),
  merchantNo: z.union([z.string().min(1), z.number().int()]).transform(String),
  merchantOrderNo: z.string().min(1),
  type: z.enum(CALLBACK_KINDS),
  /** The spec's numbers (`@mcb/core/spec`): pay-in 3/6, payout 4/5; anything else is not final. */
  state: z.number().int(),
  /** Fiat amount, exact decimal text in canonical form ("100.5", never a float). */
  amount: amountSchema,
  currency: z.string().min(1),
});

/** An order as Get order reports it (the schema's output). */
export type PlatformOrder = z.output<typeof platformOrderSchema>;

/**
 * `POST {base_url}{path}` with JSON `{merchantNo, merchantOrderNo}`; the reply's `data` is the order.
 *
 * @throws PlatformCodeError when the envelope's code is not 0 (e.g. the platform does not know the order);
 *   AppError PLATFORM_BAD_RESPONSE when the order lacks a field or the amount is not a decimal (permanent), or when
 *   the reply is not JSON or not the envelope, or over the size limit (transient: a proxy's page, a cut body);
 *   AppError PLATFORM_TIMEOUT / PLATFORM_UNREACHABLE / PLATFORM_HTTP_ERROR 5xx (transient) when the platform is
 *   down or slow; AppError PLATFORM_ABORTED when `options.signal` fires.
 */
export async function getOrder(
  http: PlatformHttp,
  params: GetOrderParams,
  options: { signal?: AbortSignal } = {},
): Promise<PlatformOrder> {
  if (!params.merchantOrderNo) {
    throw new AppError(ErrorCodes.REQUEST_INVALID, 'getOrder needs a merchant order number');
  }
  const body = {
    kind: 'json' as const,
    value: { merchantNo: params.merchantNo, merchantOrderNo: params.merchantOrderNo },
  };
  return http.post(params.path ?? GET_ORDER_PATH, body, platformOrderSchema, {
    signal: options.signal,
    parseJson: parseJsonExact,
  });
}
