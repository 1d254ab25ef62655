import { afterEach, describe, expect, it } from 'vitest';
import { createCatalogCache, refreshCatalog, type Catalog, type CatalogSource } from '@mcb/core/catalog';
import { catalogSnapshots } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { PlatformCodeError } from '@mcb/core/platform';
import { useTestEnv } from '@mcb/testkit';

const env = useTestEnv();
const logger = createLogger({ name: 'catalog-cache-test', level: 'silent' });

const catalog: Catalog = {
  currencies: [
    {
      currency: 'PHP',
      symbol: '₱',
      decimals: 2,
      methods: [{ paymentMethod: 1, name: 'Bank', kind: 'bank', fields: [], banks: [{ name: 'BDO', code: 'BDO' }] }],
    },
    { currency: 'VND', symbol: '₫', decimals: 0, methods: [] },
  ],
};

/** A platform we control: answers with the catalog, fails with a given error, and counts calls. */
function fakePlatform() {
  const state = {
    calls: [] as (string | undefined)[],
    failWith: undefined as Error | undefined,
    gate: undefined as Promise<void> | undefined,
  };
  const platform: CatalogSource = {
    async getPaymentMethods(opts = {}) {
      state.calls.push(opts.currencyType);
      if (state.gate) await state.gate;
      if (state.failWith) throw state.failWith;
      return { currencies: catalog.currencies.filter((c) => !opts.currencyType || c.currency === opts.currencyType) };
    },
  };
  return { platform, state };
}

const down = () =>
  new AppError(ErrorCodes.PLATFORM_UNREACHABLE, 'platform unreachable (connect ECONNREFUSED)', { transient: true });

let clock = Date.parse('2026-01-01T00:00:00Z');
const now = () => clock;

afterEach(async () => {
  await env.db.db.delete(catalogSnapshots);
});

describe('catalog cache', () => {
  it('stores what the platform returned with the time it was fetched', async () => {
    const { platform } = fakePlatform();
    const view = await createCatalogCache({ db: env.db.db, platform, logger, now }).get();
    expect(view).toEqual({ catalog, fetchedAt: new Date(clock), ageSeconds: 0, stale: false });
    const rows = await env.db.db.select().from(catalogSnapshots);
    expect(rows).toEqual([{ scope: '', catalog, fetchedAt: new Date(clock) }]);
  });

  it('serves a young stored copy without asking the platform, and asks again once it is old', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, freshForMs: 60_000 });
    await cache.get();
    clock += 30_000;
    expect(await cache.get()).toMatchObject({ ageSeconds: 30, stale: false });
    expect(state.calls).toHaveLength(1);
    clock += 31_000;
    expect(await cache.get()).toMatchObject({ ageSeconds: 0, stale: false });
    expect(state.calls).toHaveLength(2);
  });

  it('serves the last good catalog with its age when the platform is down', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, freshForMs: 60_000 });
    const first = await cache.get();
    state.failWith = down();
    clock += 3_600_000;
    const view = await cache.get();
    expect(view).toEqual({ catalog, fetchedAt: first.fetchedAt, ageSeconds: 3600, stale: true });
  });

  it('also falls back when the platform answers a malformed catalog', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, freshForMs: 0 });
    await cache.get();
    state.failWith = new AppError(ErrorCodes.PLATFORM_BAD_RESPONSE, 'bad shape');
    expect(await cache.get()).toMatchObject({ stale: true });
  });

  it('raises CATALOG_UNAVAILABLE when the platform is down and nothing is stored', async () => {
    const { platform, state } = fakePlatform();
    state.failWith = down();
    const err = await createCatalogCache({ db: env.db.db, platform, logger, now })
      .get()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CATALOG_UNAVAILABLE', transient: true });
    expect((err as Error).message).toContain('PLATFORM_UNREACHABLE');
  });

  it('never masks a platform error code with the stored copy', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, freshForMs: 0 });
    await cache.get();
    state.failWith = new PlatformCodeError(40017, 'currency not enabled', '/api/open/order/getPaymentMethods');
    await expect(cache.get()).rejects.toMatchObject({ platformCode: 40017, platformMessage: 'currency not enabled' });
  });

  it('narrows a young full catalog to a currency without asking the platform', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now });
    await cache.get();
    const php = await cache.get({ currency: 'PHP' });
    expect(php.catalog.currencies.map((c) => c.currency)).toEqual(['PHP']);
    expect(state.calls).toEqual([undefined]);
  });

  it('never answers an empty catalog for a currency: one the platform does not list is CURRENCY_NOT_ENABLED', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now });
    await cache.get();
    // The stored copy lacks USD, so the platform is asked (it may have been enabled since); it lists none.
    await expect(cache.get({ currency: 'USD' })).rejects.toMatchObject({
      code: 'CURRENCY_NOT_ENABLED',
      details: { currency: 'USD' },
    });
    expect(state.calls).toEqual([undefined, 'USD']);
  });

  it('asks about unknown currency codes once a window: a burst or a series of them costs one platform request', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, missWindowMs: 60_000 });
    await cache.get();
    // 1. Fifty codes the catalog does not list, all at once, then each again: one ask, the rest answered from it.
    const codes = Array.from({ length: 50 }, (_, i) => `X${String.fromCharCode(65 + (i % 26))}${i < 26 ? 'A' : 'B'}`);
    const burst = await Promise.allSettled(codes.map((currency) => cache.get({ currency })));
    const again = await Promise.allSettled(codes.map((currency) => cache.get({ currency })));
    for (const r of [...burst, ...again]) {
      expect(r).toMatchObject({ status: 'rejected', reason: { code: 'CURRENCY_NOT_ENABLED' } });
    }
    expect(state.calls).toEqual([undefined, 'XAA']);
    // 2. A listed currency is still served from the stored copy, without asking.
    expect((await cache.get({ currency: 'VND' })).catalog.currencies.map((c) => c.currency)).toEqual(['VND']);
    expect(state.calls).toHaveLength(2);
    // 3. Once the window has passed, an unknown code is asked about again (it may have been enabled since), once.
    clock += 60_000;
    await expect(cache.get({ currency: 'XYZ' })).rejects.toMatchObject({ code: 'CURRENCY_NOT_ENABLED' });
    await expect(cache.get({ currency: 'XYY' })).rejects.toMatchObject({
      code: 'CURRENCY_NOT_ENABLED',
      message: expect.stringContaining('not in the catalog stored'),
    });
    expect(state.calls).toEqual([undefined, 'XAA', 'XYZ']);
  });

  it("carries the platform's 40017 in CURRENCY_NOT_ENABLED and remembers it; 40010 is MERCHANT_UNKNOWN", async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, freshForMs: 60_000 });
    state.failWith = new PlatformCodeError(40017, 'currency not enabled', '/api/open/order/getPaymentMethods');
    const refused = {
      code: 'CURRENCY_NOT_ENABLED',
      details: { currency: 'PHP', platformCode: 40017, platformMessage: 'currency not enabled' },
    };
    await expect(cache.get({ currency: 'PHP' })).rejects.toMatchObject(refused);
    state.failWith = undefined;
    await expect(cache.get({ currency: 'PHP' })).rejects.toMatchObject(refused);
    expect(state.calls).toEqual(['PHP']);
    // Once the refusal is older than a catalog may be, the platform is asked again (and now enables PHP).
    clock += 61_000;
    expect((await cache.get({ currency: 'PHP' })).catalog.currencies.map((c) => c.currency)).toEqual(['PHP']);

    state.failWith = new PlatformCodeError(40010, 'merchant does not exist', '/api/open/order/getPaymentMethods');
    await expect(cache.refresh()).rejects.toMatchObject({ code: 'MERCHANT_UNKNOWN', details: { platformCode: 40010 } });
  });

  it('says CURRENCY_NOT_ENABLED, without a platform code, when the platform is down and the stored copy lacks the currency', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, freshForMs: 0 });
    await cache.get();
    state.failWith = down();
    const err = await cache.get({ currency: 'USD' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'CURRENCY_NOT_ENABLED' });
    expect((err as AppError).details?.platformCode).toBeUndefined();
    expect((err as Error).message).toMatch(/not in the catalog stored .*PLATFORM_UNREACHABLE/);
    // A currency the stored copy has is still served, stale.
    expect(await cache.get({ currency: 'PHP' })).toMatchObject({ stale: true });
  });

  it('asks the platform with currencyType when only an old copy exists, storing it under its own scope', async () => {
    const { platform, state } = fakePlatform();
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now, freshForMs: 60_000 });
    await cache.get();
    clock += 120_000;
    const vnd = await cache.get({ currency: 'VND' });
    expect(vnd).toMatchObject({ ageSeconds: 0, stale: false });
    expect(vnd.catalog.currencies.map((c) => c.currency)).toEqual(['VND']);
    expect(state.calls).toEqual([undefined, 'VND']);
    const scopes = (await env.db.db.select().from(catalogSnapshots)).map((r) => r.scope).sort();
    expect(scopes).toEqual(['', 'VND']);
    // Platform down: the youngest copy that answers for the currency is served.
    state.failWith = down();
    clock += 120_000;
    expect(await cache.get({ currency: 'VND' })).toMatchObject({ ageSeconds: 120, stale: true });
    expect(await cache.get({ currency: 'PHP' })).toMatchObject({ ageSeconds: 240, stale: true });
  });

  it('makes one platform request for concurrent reads of the same scope', async () => {
    const { platform, state } = fakePlatform();
    let open!: () => void;
    state.gate = new Promise<void>((r) => (open = r));
    const cache = createCatalogCache({ db: env.db.db, platform, logger, now });
    const reads = [cache.get(), cache.get(), cache.refresh()];
    open();
    const views = await Promise.all(reads);
    expect(state.calls).toHaveLength(1);
    expect(views.every((v) => v.catalog.currencies.length === 2)).toBe(true);
  });

  it('refreshCatalog stores the full catalog, and an older fetch never replaces a younger one', async () => {
    const { platform } = fakePlatform();
    const result = await refreshCatalog({ db: env.db.db, platform, logger, now });
    expect(result).toEqual({ fetchedAt: new Date(clock), currencies: 2 });
    const younger = clock;
    // The drizzle instance works as well as the handle.
    await refreshCatalog({ db: env.db.db, platform, logger, now: () => younger - 10_000 });
    const [row] = await env.db.db.select().from(catalogSnapshots);
    expect(row!.fetchedAt).toEqual(new Date(younger));
  });

  it('refreshCatalog propagates a platform failure and leaves the stored copy alone', async () => {
    const { platform, state } = fakePlatform();
    await refreshCatalog({ db: env.db.db, platform, logger, now });
    state.failWith = down();
    await expect(refreshCatalog({ db: env.db.db, platform, logger, now: () => clock + 1000 })).rejects.toMatchObject({
      code: 'PLATFORM_UNREACHABLE',
    });
    const [row] = await env.db.db.select().from(catalogSnapshots);
    expect(row!.fetchedAt).toEqual(new Date(clock));
  });

  it('ignores a stored copy that no longer matches the schema', async () => {
    await env.db.db
      .insert(catalogSnapshots)
      .values({ scope: '', catalog: { currencies: [{ nope: 1 }] }, fetchedAt: new Date(clock) });
    const { platform, state } = fakePlatform();
    state.failWith = down();
    await expect(createCatalogCache({ db: env.db.db, platform, logger, now }).get()).rejects.toMatchObject({
      code: 'CATALOG_UNAVAILABLE',
    });
  });
});
