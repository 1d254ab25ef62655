import type { CatalogCache } from '@mcb/core/catalog';
import { legacyMerchant, type Merchant } from '@mcb/core/config';
import type { Db } from '@mcb/core/db';
import type { Logger } from '@mcb/core/logger';
import type { Queue } from 'bullmq';

/** What the console's route plugins receive as their options. */
export interface RouteDeps {
  db: Db;
  catalog: CatalogCache;
  /** Where the action layer logs each operator action. */
  logger: Logger;
  /** The callbacks queue: the order view's timeline includes the jobs. @defaultValue none (database only) */
  queue?: Queue;
  /**
   * The merchant number whose orders it registers and reads: the one merchant a console serves today ({@link
   * consoleMerchantNo}); a `merchant` request parameter chooses among several later.
   */
  merchantNo: string;
}

/** The merchant a console serves until requests name one: the legacy routes' merchant (MERCHANT_NO), else the first. */
export function consoleMerchantNo(merchants: readonly Merchant[]): string {
  return (legacyMerchant(merchants) ?? merchants[0])?.merchantNo ?? '';
}
