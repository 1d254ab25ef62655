import type { CatalogCache } from '@mcb/core/catalog';
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
}
