import type { Dispatcher } from 'undici';
import { legacyMerchant, type Config, type Merchant } from '../config/index.ts';
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
 * A platform client of `merchant` from the config, for the apps' lanes and CLIs: its base URL (`platformBaseUrl`, else
 * `PLATFORM_BASE_URL`) and number, with its own HTTP pool; `merchant` defaults to the legacy routes' merchant (the one
 * `MERCHANT_NO` makes without MERCHANTS_FILE), else the first. `loadConfig` with role worker or console already
 * requires both settings; a caller with another role gets the same error, naming each missing one.
 */
export function createPlatformClientFromConfig(
  config: Pick<
    Config,
    'PLATFORM_BASE_URL' | 'PLATFORM_GET_ORDER_PATH' | 'PLATFORM_CONTENT_TYPE' | 'PLATFORM_TIMEOUT' | 'merchants'
  >,
  extra: Pick<PlatformClientOptions, 'authenticate' | 'dispatcher' | 'connections'> & { merchant?: Merchant } = {},
): PlatformClient {
  const { merchant = legacyMerchant(config.merchants) ?? config.merchants[0], ...options } = extra;
  const baseUrl = merchant?.platformBaseUrl ?? config.PLATFORM_BASE_URL;
  const merchantNo = merchant?.merchantNo;
  const missing = [!merchantNo && 'MERCHANT_NO', !baseUrl && 'PLATFORM_BASE_URL'].filter((n): n is string => !!n);
  if (!baseUrl || !merchantNo) {
    const problems = missing.map((n) => `${n}: required to reach the platform (unset)`);
    throw new AppError(ErrorCodes.CONFIG_INVALID, `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  return createPlatformClient({
    baseUrl,
    merchantNo,
    getOrderPath: config.PLATFORM_GET_ORDER_PATH,
    contentType: config.PLATFORM_CONTENT_TYPE,
    timeoutMs: config.PLATFORM_TIMEOUT,
    ...options,
  });
}
