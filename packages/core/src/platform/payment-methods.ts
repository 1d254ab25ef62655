import { catalogSchema, type Catalog } from '../catalog/schema.ts';
import type { PlatformHttp } from './http.ts';

/** Path of the spec's "Query payment methods" operation under `{base_url}`. */
export const GET_PAYMENT_METHODS_PATH = '/api/open/order/getPaymentMethods';

/** Parameters of {@link getPaymentMethods}. */
export interface GetPaymentMethodsParams {
  /** Our merchant number. */
  merchantNo: string;
  /** Only this fiat currency; omitted means every enabled currency. */
  currencyType?: string;
  /** Body encoding; the spec does not say which the platform expects (`PLATFORM_CONTENT_TYPE`). */
  contentType: 'json' | 'form';
}

/**
 * The spec's "Query payment methods": `POST {base_url}/api/open/order/getPaymentMethods` with `merchantNo` and an
 * optional `currencyType`, returning the catalog parsed exactly as the spec's tables say.
 *
 * @throws PlatformCodeError when the envelope's code is not 0 (40010, 40017 or any other), carrying the
 *   platform's code and message; AppError PLATFORM_BAD_RESPONSE when the catalog lacks a required field;
 *   AppError PLATFORM_TIMEOUT / PLATFORM_UNREACHABLE / PLATFORM_HTTP_ERROR (transient) when the platform is down.
 */
export async function getPaymentMethods(
  http: PlatformHttp,
  params: GetPaymentMethodsParams,
  options: { signal?: AbortSignal } = {},
): Promise<Catalog> {
  const value: Record<string, string> = { merchantNo: params.merchantNo };
  if (params.currencyType !== undefined) value.currencyType = params.currencyType;
  const body = params.contentType === 'form' ? { kind: 'form' as const, value } : { kind: 'json' as const, value };
  return http.post(GET_PAYMENT_METHODS_PATH, body, catalogSchema, options);
}
