import type { Dispatcher } from 'undici';
import type { Config } from '../config/index.ts';
import { AppError, ErrorCodes } from '../errors.ts';
import { getOrder, type PlatformOrder } from './get-order.ts';
import { createPlatformHttp, type AuthenticateRequest } from './http.ts';
import type { Catalog } from '../catalog/schema.ts';
import { getPaymentMethods } from './payment-methods.ts';

/** Options of {@link createPlatformClient}. */
export interface PlatformClientOptions {
  /** The platform's `{base_url}` (`PLATFORM_BASE_URL`). */
  baseUrl: string;
  /** Our merchant number (`MERCHANT_NO`), sent with every request. */
  merchantNo: string;
  /** Path of Get order (`PLATFORM_GET_ORDER_PATH`). @defaultValue GET_ORDER_PATH (get-order.ts) */
  getOrderPath?: string;
  /** Body encoding of getPaymentMethods (`PLATFORM_CONTENT_TYPE`); Get order is always JSON. @defaultValue 'json' */
  contentType?: 'json' | 'form';
  /** Overall deadline of one request, in ms (`PLATFORM_TIMEOUT`); keep it well under the job lock. @defaultValue 10000 */
  timeoutMs?: number;
  /** The request-authentication hook (the spec does not say how requests are authenticated). */
  authenticate?: AuthenticateRequest;
  /** A dispatcher instead of the client's own pooled Agent (tests, proxies). */
  dispatcher?: Dispatcher;
  /** Keep-alive connections to the platform at most (the worker: WORKER_CONCURRENCY). @defaultValue no limit */
  connections?: number;
}

/** The platform's API as the pipeline uses it. One method per operation; each lives in its own module. */
export interface PlatformClient {
  /** Get order by our merchant order number; see get-order.ts for the assumed shape and the errors. */
  getOrder(merchantOrderNo: string, opts?: { signal?: AbortSignal }): Promise<PlatformOrder>;
  /** The payment-method catalog, narrowed to `currencyType` when given; see payment-methods.ts for the errors. */
  getPaymentMethods(opts?: { currencyType?: string; signal?: AbortSignal }): Promise<Catalog>;
  close(): Promise<void>;
}

/** A platform client: a small composition of the per-operation modules over one HTTP base. */
export function createPlatformClient(opts: PlatformClientOptions): PlatformClient {
  const http = createPlatformHttp({
    baseUrl: opts.baseUrl,
    timeoutMs: opts.timeoutMs,
    authenticate: opts.authenticate,
    dispatcher: opts.dispatcher,
    connections: opts.connections,
  });
  return {
    getOrder: (merchantOrderNo, callOpts) =>
      getOrder(http, { merchantNo: opts.merchantNo, merchantOrderNo, path: opts.getOrderPath }, callOpts),
    getPaymentMethods: (callOpts = {}) =>
      getPaymentMethods(
        http,
        { merchantNo: opts.merchantNo, currencyType: callOpts.currencyType, contentType: opts.contentType ?? 'json' },
        { signal: callOpts.signal },
      ),
    close: () => http.close(),
  };
}

/**
 * A platform client from the environment (`PLATFORM_*`, `MERCHANT_NO`), for the apps' main.ts files and CLIs.
 * `loadConfig` with role worker or console already requires both; a caller with another role gets the same error.
 */
export function createPlatformClientFromConfig(
  config: Pick<
    Config,
    'PLATFORM_BASE_URL' | 'MERCHANT_NO' | 'PLATFORM_GET_ORDER_PATH' | 'PLATFORM_CONTENT_TYPE' | 'PLATFORM_TIMEOUT'
  >,
  extra: Pick<PlatformClientOptions, 'authenticate' | 'dispatcher' | 'connections'> = {},
): PlatformClient {
  const missing = (['MERCHANT_NO', 'PLATFORM_BASE_URL'] as const).filter((name) => config[name] === undefined);
  if (missing.length > 0 || !config.PLATFORM_BASE_URL || !config.MERCHANT_NO) {
    throw new AppError(
      ErrorCodes.CONFIG_INVALID,
      `invalid configuration:\n  - ${missing.map((n) => `${n}: required to reach the platform (unset)`).join('\n  - ')}`,
      { details: { problems: missing.map((n) => `${n}: required to reach the platform (unset)`) } },
    );
  }
  return createPlatformClient({
    baseUrl: config.PLATFORM_BASE_URL,
    merchantNo: config.MERCHANT_NO,
    getOrderPath: config.PLATFORM_GET_ORDER_PATH,
    contentType: config.PLATFORM_CONTENT_TYPE,
    timeoutMs: config.PLATFORM_TIMEOUT,
    ...extra,
  });
}
