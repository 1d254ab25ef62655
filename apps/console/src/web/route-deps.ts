import type { CatalogCache } from '@mcb/core/catalog';
import { legacyMerchant, type Merchant } from '@mcb/core/config';
import type { Db } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { PlatformClient } from '@mcb/core/platform';
import type { Queue } from 'bullmq';

/** What the console's route plugins receive as their options. */
export interface RouteDeps {
  db: Db;
  /** The catalog of the merchant a console served before merchants were named (the legacy one, else the first). */
  catalog: CatalogCache;
  /** Where the action layer logs each operator action. */
  logger: Logger;
  /** The callbacks queue: the order view's timeline includes the jobs. @defaultValue none (database only) */
  queue?: Queue;
  /** The callbacks queue of the merchant with this number (several merchants); undefined: `queue`. */
  queueOf?: (merchantNo: string) => Queue | undefined;
  /**
   * The merchant number a console served before requests named one ({@link consoleMerchantNo}); areas that take a
   * `merchant` resolve it through {@link RouteDeps.merchants} instead.
   */
  merchantNo: string;
  /** The merchants this console serves, each with its platform client and catalog (docs/merchants.md "Console"). */
  merchants: ConsoleMerchants;
}

/** The merchant a console serves until requests name one: the legacy routes' merchant (MERCHANT_NO), else the first. */
export function consoleMerchantNo(merchants: readonly Merchant[]): string {
  return (legacyMerchant(merchants) ?? merchants[0])?.merchantNo ?? '';
}

// --- merchants (issue 50: several merchant numbers) ---

/** One merchant as the console serves it: its platform client (Get order, the catalog) and its catalog cache. */
export interface ConsoleMerchant {
  readonly merchant: Merchant;
  readonly platform: PlatformClient;
  readonly catalog: CatalogCache;
}

/** The console's merchants, and how a request's `merchant` (a ref) picks one. */
export interface ConsoleMerchants {
  readonly all: readonly ConsoleMerchant[];
  /** Two or more: requests must name one, and views name the merchant. */
  readonly several: boolean;
  /**
   * The merchant `ref` names; with none given, the only merchant. 400 REQUEST_INVALID naming `field` when the ref is
   * unknown, or when none is given and there are two or more.
   */
  of(ref: string | undefined, field?: string): ConsoleMerchant;
  /** The merchant of a merchant number (a row's `merchant_no`), if configured. */
  byNo(merchantNo: string): ConsoleMerchant | undefined;
}

/**
 * The one rule of a request's `merchant` (a ref) over `items` (in config order): the item whose ref it names; with none
 * given, the only item. 400 REQUEST_INVALID naming `field` (and the refs) when the ref is unknown, or when none is
 * given and there are two or more. The console's merchants and its merchants' queues both resolve through it.
 */
export function pickByRef<T>(
  items: readonly T[],
  refOf: (item: T) => string,
  ref: string | undefined,
  field = 'merchant',
): T {
  const refs = items.map(refOf);
  if (ref === undefined || ref === '') {
    if (items.length === 1) return items[0]!;
    throw new AppError(
      ErrorCodes.REQUEST_INVALID,
      `${field}: required: this console serves ${items.length} merchants (${refs.join(', ')}); name one by its ref`,
      { details: { field, merchants: refs } },
    );
  }
  const found = items.find((item) => refOf(item) === ref);
  if (!found)
    throw new AppError(
      ErrorCodes.REQUEST_INVALID,
      `${field}: unknown merchant "${ref.slice(0, 40)}"; expected one of ${refs.join(', ')}`,
      { details: { field, merchants: refs } },
    );
  return found;
}

/** The resolver over `all` (in config order). */
export function consoleMerchants(all: readonly ConsoleMerchant[]): ConsoleMerchants {
  return {
    all,
    several: all.length > 1,
    of: (ref, field) => pickByRef(all, (m) => m.merchant.ref, ref, field),
    byNo: (merchantNo) => all.find((m) => m.merchant.merchantNo === merchantNo),
  };
}

/** `?merchant=` / `merchant` in a body: a ref's shape (the resolver says whether it is configured). */
export const MERCHANT_FIELD_DESCRIPTION =
  "The merchant's ref (MERCHANTS_FILE); required when the console serves two or more merchants";
