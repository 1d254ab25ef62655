/**
 * Catalog actions: fetch the payment-method catalog from the platform now. The role, the reason and the audit row are
 * checked and written here (STYLE 18); the API only calls it.
 */
import type { CatalogCache, CatalogView } from '@mcb/core/catalog';
import { performExternalAction, type ActionDeps, type Actor } from '../audit/perform.ts';

/** What refreshing the catalog needs: the action layer's, and the catalog cache that stores the new snapshot. */
export interface CatalogActionDeps extends ActionDeps {
  catalog: CatalogCache;
}

/**
 * Ask the platform for the catalog now (narrowed to `currency` when given) and store a new snapshot (role operator,
 * a reason). No fallback: a platform failure is reported as such. The snapshot commits in the cache's own
 * transaction, so this is an external action (its intent row first).
 */
export async function refreshCatalog(
  deps: CatalogActionDeps,
  actor: Actor,
  input: { currency?: string | undefined; reason: unknown; target?: string; merchant?: string },
): Promise<CatalogView> {
  return performExternalAction(
    deps,
    actor,
    { action: 'catalog.refresh', target: input.target ?? 'catalog', reason: input.reason, merchant: input.merchant },
    async () => {
      const fresh = await deps.catalog.refresh({ currency: input.currency });
      return { result: fresh, outcome: 'refreshed', details: { currencies: fresh.catalog.currencies.length } };
    },
  );
}
