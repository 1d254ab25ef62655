import { inArray, sql } from 'drizzle-orm';
import type { Database } from '../db/client.ts';
import { catalogSnapshots } from '../db/schema.ts';
import { AppError, coerceError, ErrorCodes, isAppError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import { PlatformCodeError } from '../platform/http.ts';
import { PLATFORM_CODES } from '../spec.ts';
import { catalogSchema, narrowCatalog, type Catalog } from './schema.ts';

/** What the cache needs from the platform client (`PlatformClient` satisfies it). */
export interface CatalogSource {
  getPaymentMethods(options?: { currencyType?: string; signal?: AbortSignal }): Promise<Catalog>;
}

/** Dependencies of {@link createCatalogCache} and {@link refreshCatalog}. */
export interface CatalogCacheDeps {
  /** The database (`db.db` of the handle from `createDb`; whoever holds the handle closes it). */
  db: Database;
  platform: CatalogSource;
  logger: Logger;
  /**
   * How long a stored catalog is served without asking the platform, in ms. The worker's repeatable refresh
   * keeps it young; past this age a read asks the platform first. @defaultValue 300000 (5 minutes)
   */
  freshForMs?: number;
  /**
   * The window of unknown currencies, in ms: once the platform said a currency the stored copy does not list is not
   * enabled, other such currencies are answered CURRENCY_NOT_ENABLED without asking until it ends, and concurrent
   * asks for unlisted currencies go one at a time. Unknown codes cost the platform one request a window, not one each.
   * @defaultValue 60000 (1 minute)
   */
  missWindowMs?: number;
  /** Clock in ms since the epoch (tests). @defaultValue Date.now */
  now?: () => number;
  /**
   * Whose snapshots these are: the prefix of every scope key in catalog_snapshots ({@link catalogScopeOf} a merchant).
   * '' is the rows written before merchants were named (the legacy merchant's). @defaultValue ''
   */
  merchantScope?: string;
}

/**
 * The catalog_snapshots prefix of a merchant's rows: '' for the merchant on the legacy routes (the single merchant of
 * MERCHANT_NO, whose rows predate several merchants), `m:{merchantNo}/` for every other. Each merchant's catalog is
 * its own (the platform answers the catalog query for the merchantNo asked with).
 */
export function catalogScopeOf(merchant: { merchantNo: string; legacyRoutes: boolean }): string {
  return merchant.legacyRoutes ? '' : `m:${merchant.merchantNo}/`;
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
   * Never an empty catalog for a currency: one the platform does not enable is an error.
   * @throws AppError CURRENCY_NOT_ENABLED naming the currency: the platform answered 40017 (details.platformCode,
   *   remembered for `freshForMs`, so a repeat says the same without asking), or it answered a catalog without that
   *   currency, or the platform is down and the stored copy lacks it (then without a platform code).
   * @throws AppError MERCHANT_UNKNOWN when the platform answers 40010 (it does not know MERCHANT_NO).
   * @throws PlatformCodeError when the platform answers any other non-zero code: never masked by the stored copy.
   * @throws AppError CATALOG_UNAVAILABLE (transient) when the platform is down and nothing is stored.
   */
  get(options?: { currency?: string; signal?: AbortSignal }): Promise<CatalogView>;
  /** Ask the platform now and store the answer; no fallback (errors propagate). */
  refresh(options?: { currency?: string; signal?: AbortSignal }): Promise<CatalogView>;
}

/** Scope key of catalog_snapshots: '' is the full catalog, otherwise the currency it was narrowed to. */
const scopeOf = (currency: string | undefined) => currency ?? '';

/** `currency` is not enabled for this merchant; `refusal` is the platform's own answer, when it gave one. */
function currencyNotEnabled(currency: string, refusal?: PlatformCodeError, basis?: string): AppError {
  const said = refusal
    ? ` (platform code ${refusal.platformCode}: ${refusal.platformMessage || 'no message'})`
    : basis
      ? ` (${basis})`
      : '';
  return new AppError(ErrorCodes.CURRENCY_NOT_ENABLED, `currency ${currency} is not enabled for this merchant${said}`, {
    cause: refusal,
    details: {
      currency,
      ...(refusal ? { platformCode: refusal.platformCode, platformMessage: refusal.platformMessage } : {}),
    },
  });
}

/** The platform's refusals of the catalog query with a meaning of their own (spec: 40010, 40017); others as is. */
function meaningOf(e: unknown, currency: string | undefined): unknown {
  if (!(e instanceof PlatformCodeError)) return e;
  if (e.platformCode === PLATFORM_CODES.currencyNotEnabled && currency !== undefined)
    return currencyNotEnabled(currency, e);
  if (e.platformCode === PLATFORM_CODES.merchantUnknown) {
    return new AppError(
      ErrorCodes.MERCHANT_UNKNOWN,
      `the platform does not know this merchant number ` +
        `(platform code ${e.platformCode}: ${e.platformMessage || 'no message'}); check MERCHANT_NO`,
      { cause: e, details: { platformCode: e.platformCode, platformMessage: e.platformMessage } },
    );
  }
  return e;
}

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

/** A catalog as a view at `nowMs`. */
function viewOf(catalog: Catalog, fetchedAt: Date, stale: boolean, nowMs: number): CatalogView {
  return { catalog, fetchedAt, ageSeconds: Math.max(0, Math.floor((nowMs - fetchedAt.getTime()) / 1000)), stale };
}

type Stored = { catalog: Catalog; fetchedAt: Date };

/** The youngest stored copy that answers for `currency`: its own scope, or the full catalog narrowed. */
async function readStored(
  database: Database,
  logger: Logger,
  currency: string | undefined,
  prefix: string,
): Promise<Stored | undefined> {
  const scopes = (currency === undefined ? [''] : ['', currency]).map((s) => prefix + s);
  let rows: { scope: string; catalog: unknown; fetchedAt: Date }[];
  try {
    rows = await database.select().from(catalogSnapshots).where(inArray(catalogSnapshots.scope, scopes));
  } catch (e) {
    logger.warn({ err: coerceError(e) }, 'catalog: cannot read the stored catalog; asking the platform');
    return undefined;
  }
  let best: Stored | undefined;
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

async function store(database: Database, logger: Logger, scope: string, catalog: Catalog, fetchedAt: Date) {
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

/**
 * The answer when the platform gave no catalog (`err`): the stored copy served stale, or why there is none to
 * serve. `answers` is false when the stored copy lacks `currency`.
 */
function fallBack(
  err: AppError,
  stored: Stored | undefined,
  answers: boolean,
  currency: string | undefined,
  view: (catalog: Catalog, fetchedAt: Date, stale: boolean) => CatalogView,
  logger: Logger,
): CatalogView {
  if (stored && !answers) {
    throw currencyNotEnabled(
      currency!,
      undefined,
      `not in the catalog stored ${stored.fetchedAt.toISOString()}; the platform could not be asked (${err.code})`,
    );
  }
  if (stored) {
    const served = view(stored.catalog, stored.fetchedAt, true);
    logger.warn(
      { code: err.code, ageSeconds: served.ageSeconds },
      'catalog: platform gave no catalog; serving the stored copy',
    );
    return served;
  }
  if (!err.transient) throw err;
  throw new AppError(
    ErrorCodes.CATALOG_UNAVAILABLE,
    `no catalog is stored and the platform is unavailable (${err.code})`,
    {
      cause: err,
      details: { platformError: err.code },
      transient: true,
    },
  );
}

/**
 * The gate of misses (asks for a currency no stored copy lists): one at a time, and once one is answered "not
 * enabled", none for `windowMs`: `refuse` answers them instead. A burst of unknown codes costs one platform request.
 */
function createMissGate(windowMs: number, now: () => number) {
  let refusedAt: number | undefined;
  let running: Promise<unknown> | undefined;
  return async <T>(ask: () => Promise<T>, refuse: () => AppError): Promise<T> => {
    for (;;) {
      if (refusedAt !== undefined && now() - refusedAt < windowMs) throw refuse();
      if (!running) break;
      await running.catch(() => undefined);
    }
    const work = ask();
    running = work;
    try {
      return await work;
    } catch (e) {
      if (isAppError(e) && e.code === ErrorCodes.CURRENCY_NOT_ENABLED) refusedAt = now();
      throw e;
    } finally {
      if (running === work) running = undefined;
    }
  };
}

/** A miss answered without asking, inside the window of {@link createMissGate}. */
function unlisted(currency: string, stored: Stored): AppError {
  return currencyNotEnabled(
    currency,
    undefined,
    `not in the catalog stored ${stored.fetchedAt.toISOString()}; ` +
      'the platform is asked about unlisted currencies once a minute after it refused one',
  );
}

export function createCatalogCache(deps: CatalogCacheDeps): CatalogCache {
  const { platform, logger } = deps;
  const database = deps.db;
  const freshForMs = deps.freshForMs ?? 300_000;
  const now = deps.now ?? Date.now;
  const inflight = new Map<string, Promise<CatalogView>>();
  /** The platform's "not enabled" answers by currency, kept as long as a catalog would be (a typo asks once). */
  const refusals = new Map<string, { error: AppError; at: number }>();
  const misses = createMissGate(deps.missWindowMs ?? 60_000, now);
  const prefix = deps.merchantScope ?? '';
  /** Fetches finished so far, and the last one per scope: a read whose look-up raced a fetch uses that fetch. */
  let fetches = 0;
  const lastFetch = new Map<string, { catalog: Catalog; fetchedAt: Date; seq: number }>();

  const view = (catalog: Catalog, fetchedAt: Date, stale: boolean): CatalogView =>
    viewOf(catalog, fetchedAt, stale, now());

  function fetchAndStore(currency: string | undefined, signal: AbortSignal | undefined): Promise<CatalogView> {
    const scope = scopeOf(currency);
    const running = inflight.get(scope);
    if (running) return running;
    const work = (async () => {
      let catalog: Catalog;
      try {
        catalog = await platform.getPaymentMethods({ currencyType: currency, signal });
      } catch (e) {
        const meant = meaningOf(e, currency);
        if (isAppError(meant) && meant.code === ErrorCodes.CURRENCY_NOT_ENABLED)
          refusals.set(scope, { error: meant, at: now() });
        throw meant;
      }
      refusals.delete(scope);
      if (currency !== undefined && !catalog.currencies.some((c) => c.currency === currency)) {
        throw currencyNotEnabled(currency, undefined, 'the platform answered a catalog without it');
      }
      const fetchedAt = new Date(now());
      await store(database, logger, prefix + scope, catalog, fetchedAt);
      lastFetch.set(scope, { catalog, fetchedAt, seq: ++fetches });
      logger.info({ scope: scope || '(all)', currencies: catalog.currencies.length }, 'catalog: refreshed');
      return view(catalog, fetchedAt, false);
    })().finally(() => inflight.delete(scope));
    inflight.set(scope, work);
    return work;
  }

  return {
    async get(options = {}) {
      const { currency } = options;
      const before = fetches;
      const stored = await readStored(database, logger, currency, prefix);
      // A fetch of this scope that finished while the stored copy was being read is younger than that copy.
      const raced = lastFetch.get(scopeOf(currency));
      if (raced && raced.seq > before) return view(raced.catalog, raced.fetchedAt, false);
      // A stored copy without the currency is not an answer: the currency may have been enabled since.
      const answers = stored !== undefined && (currency === undefined || stored.catalog.currencies.length > 0);
      if (answers && now() - stored.fetchedAt.getTime() < freshForMs)
        return view(stored.catalog, stored.fetchedAt, false);
      const refused = refusals.get(scopeOf(currency));
      if (refused && now() - refused.at < freshForMs) throw refused.error;
      const ask = () => fetchAndStore(currency, options.signal);
      try {
        // A currency the stored catalog does not list (a typo, a guess, or enabled since) is a miss: asked through
        // the gate. (With nothing stored there is nothing to tell a miss by: asked as any first read.)
        return await (stored && !answers ? misses(ask, () => unlisted(currency!, stored)) : ask());
      } catch (e) {
        if (!platformGaveNoCatalog(e)) throw e;
        return fallBack(e as AppError, stored, answers, currency, view, logger);
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
  deps: Pick<CatalogCacheDeps, 'db' | 'platform' | 'logger' | 'now' | 'merchantScope'>,
  options: { signal?: AbortSignal } = {},
): Promise<{ fetchedAt: Date; currencies: number }> {
  const fresh = await createCatalogCache(deps).refresh({ signal: options.signal });
  return { fetchedAt: fresh.fetchedAt, currencies: fresh.catalog.currencies.length };
}
