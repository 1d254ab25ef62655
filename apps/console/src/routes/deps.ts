import type { CatalogCache } from '@mcb/core/catalog';
import type { Db } from '@mcb/core/db';
import type { Queue } from 'bullmq';

/** What the console's route plugins receive as their options. */
export interface RouteDeps {
  db: Db;
  catalog: CatalogCache;
  /** The callbacks queue: the order view's timeline includes the jobs. @defaultValue none (database only) */
  queue?: Queue;
}
