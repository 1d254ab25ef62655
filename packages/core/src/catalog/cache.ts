import { inArray, sql } from 'drizzle-orm';
import type { Database, Db } from '../db/client.ts';
import { catalogSnapshots } from '../db/schema.ts';
import { AppError, coerceError, ErrorCodes, isAppError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { catalogSchema, narrowCatalog, type Catalog } from './schema.ts';

/** What the cache needs from the platform client (`PlatformClient` satisfies it). */
export interface CatalogSource {
  getPaymentMethods(options?: { currencyType?: string; signal?: AbortSignal }): Promise<Catalog>;
}

/** Dependencies of {@link createCatalogCache} and {@link refreshCatalog}. */
export interface CatalogCacheDeps {
  /** The handle from `createDb` or its drizzle instance (`db.db`), whichever the caller holds. */
  db: Db | Database;
  platform: CatalogSource;
  logger: Logger;
  /**
   * How long a stored catalog is served without asking the platform, in ms. The worker's repeatable refresh
   * keeps it young; past this age a read asks the platform first. @defaultValue 300000 (5 minutes)
   */
  freshForMs?: number;
  /** Clock in ms since the epoch (tests). @defaultValue Date.now */
  now?: () => number;
}

/** A catalog with where it stands in time. */
export interface CatalogView {
  catalog: Catalog;
  /** When the platform returned it. */
  fetchedAt: Date;
  /** Whole seconds since `fetchedAt`. */
  ageSeconds: number;
  /** True when this is the last good copy, served because the platform could not give a fresh one. */
  stale: boolean;
}

export interface CatalogCache {
  /**
   * The catalog (narrowed to `currency` when given). A stored copy younger than `freshForMs` is served as is;
   * otherwise the platform is asked and the answer stored. When the platform is down or answers garbage, the last
   * good copy is served with `stale: true` and its age.
   * @throws PlatformCodeError when the platform answers a non-zero code (40010, 40017, ...): never masked.
   * @throws AppError CATALOG_UNAVAILABLE (transient) when the platform is down and nothing is stored.
   */
  get(options?: { currency?: string; signal?: AbortSignal }): Promise<CatalogView>;
  /** Ask the platform now and store the answer; no fallback (errors propagate). */
  refresh(options?: { currency?: string; signal?: AbortSignal }): Promise<CatalogView>;
}

/** Scope key of catalog_snapshots: '' is the full catalog, otherwise the currency it was narrowed to. */
const scopeOf = (currency: string | undefined) => currency ?? '';

/** Errors after which the last good catalog is a better answer than none: the platform gave no usable catalog. */
function platformGaveNoCatalog(e: unknown): boolean {
  return (
    isAppError(e) &&
    (e.code === ErrorCodes.PLATFORM_TIMEOUT ||
      e.code === ErrorCodes.PLATFORM_UNREACHABLE ||
      e.code === ErrorCodes.PLATFORM_HTTP_ERROR ||
      e.code === ErrorCodes.PLATFORM_BAD_RESPONSE)
  );
}

export function createCatalogCache(deps: CatalogCacheDeps): CatalogCache {
  const { platform, logger } = deps;
  const database: Database = 'pool' in deps.db && 'close' in deps.db ? deps.db.db : deps.db;
  const freshForMs = deps.freshForMs ?? 300_000;
  const now = deps.now ?? Date.now;
  const inflight = new Map<string, Promise<CatalogView>>();

  const view = (catalog: Catalog, fetchedAt: Date, stale: boolean): CatalogView => ({
    catalog,
    fetchedAt,
    ageSeconds: Math.max(0, Math.floor((now() - fetchedAt.getTime()) / 1000)),
    stale,
  });

  /** The youngest stored copy that answers for `currency`: its own scope, or the full catalog narrowed. */
  async function readStored(currency: string | undefined): Promise<{ catalog: Catalog; fetchedAt: Date } | undefined> {
    const scopes = currency === undefined ? [''] : ['', currency];
    let rows: { scope: string; catalog: unknown; fetchedAt: Date }[];
    try {
      rows = await database.select().from(catalogSnapshots).where(inArray(catalogSnapshots.scope, scopes));
    } catch (e) {
      logger.warn({ err: coerceError(e) }, 'catalog: cannot read the stored catalog; asking the platform');
      return undefined;
    }
    let best: { catalog: Catalog; fetchedAt: Date } | undefined;
    for (const row of rows) {
      const parsed = catalogSchema.safeParse(row.catalog);
      if (!parsed.success) {
        logger.error({ scope: row.scope }, 'catalog: stored catalog no longer matches the schema; ignoring it');
        continue;
      }
      if (!best || row.fetchedAt > best.fetchedAt) {
        best = { catalog: narrowCatalog(parsed.data, currency), fetchedAt: row.fetchedAt };
      }
    }
    return best;
  }

  async function store(scope: string, catalog: Catalog, fetchedAt: Date): Promise<void> {
    try {
      // Only a younger copy replaces the stored one, so a slow refresh cannot overwrite a newer answer.
      await database
        .insert(catalogSnapshots)
        .values({ scope, catalog: catalog as unknown as Record<string, unknown>, fetchedAt })
        .onConflictDoUpdate({
          target: catalogSnapshots.scope,
          set: { catalog: sql`excluded.catalog`, fetchedAt: sql`excluded.fetched_at` },
          setWhere: sql`${catalogSnapshots.fetchedAt} < excluded.fetched_at`,
        });
    } catch (e) {
      // The caller still gets the fresh catalog; only the fallback copy is older than it could be.
      logger.error({ err: coerceError(e), scope }, 'catalog: cannot store the fetched catalog');
    }
  }

  function fetchAndStore(currency: string | undefined, signal: AbortSignal | undefined): Promise<CatalogView> {
    const scope = scopeOf(currency);
    const running = inflight.get(scope);
    if (running) return running;
    const work = (async () => {
      const catalog = await platform.getPaymentMethods({ currencyType: currency, signal });
      const fetchedAt = new Date(now());
      await store(scope, catalog, fetchedAt);
      logger.info({ scope: scope || '(all)', currencies: catalog.currencies.length }, 'catalog: refreshed');
      return view(catalog, fetchedAt, false);
    })().finally(() => inflight.delete(scope));
    inflight.set(scope, work);
    return work;
  }

  return {
    async get(options = {}) {
      const stored = await readStored(options.currency);
      if (stored && now() - stored.fetchedAt.getTime() < freshForMs) return view(stored.catalog, stored.fetchedAt, false);
      try {
        return await fetchAndStore(options.currency, options.signal);
      } catch (e) {
        if (!platformGaveNoCatalog(e)) throw e;
        const err = e as AppError;
        if (stored) {
          const served = view(stored.catalog, stored.fetchedAt, true);
          logger.warn({ code: err.code, ageSeconds: served.ageSeconds }, 'catalog: platform gave no catalog; serving the stored copy');
          return served;
        }
        if (!err.transient) throw err;
        throw new AppError(ErrorCodes.CATALOG_UNAVAILABLE, `no catalog is stored and the platform is unavailable (${err.code})`, {
          cause: err,
          details: { platformError: err.code },
          transient: true,
        });
      }
    },
    refresh(options = {}) {
      return fetchAndStore(options.currency, options.signal);
    },
  };
}

/**
 * The repeatable catalog-refresh job (`MaintenanceJobs.catalogRefresh` on the maintenance queue, every
 * `CATALOG_REFRESH_INTERVAL`): fetch the full catalog and store it as the last good copy. Throws on failure so the
 * queue's retry and alerting see it; the stored copy is left as it was.
 */
export async function refreshCatalog(
  deps: Pick<CatalogCacheDeps, 'db' | 'platform' | 'logger' | 'now'>,
  options: { signal?: AbortSignal } = {},
): Promise<{ fetchedAt: Date; currencies: number }> {
  const fresh = await createCatalogCache(deps).refresh({ signal: options.signal });
  return { fetchedAt: fresh.fetchedAt, currencies: fresh.catalog.currencies.length };
}
