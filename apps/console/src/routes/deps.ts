import type { CatalogCache } from '@mcb/core/catalog';
import type { Db } from '@mcb/core/db';

/** What the console's route plugins receive as their options. */
export interface RouteDeps {
  db: Db;
  catalog: CatalogCache;
}
