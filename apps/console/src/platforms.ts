/**
 * The console's platform clients, one per merchant (docs/merchants.md "Console"), built as each worker lane builds its
 * own: the merchant's base URL (`platformBaseUrl ?? PLATFORM_BASE_URL`) and number, an HTTP pool of its own, behind a
 * guard that takes Get order's start times from the merchant's fleet-wide budget (`getOrderRps ?? PLATFORM_MAX_RPS`),
 * beside the workers. Re-verify, the dry run, "sweep now" and the catalog use them.
 */
import type { Config } from '@mcb/core/config';
import type { Releasers } from '@mcb/core/lifecycle';
import type { Logger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import { AggregatorRegistry } from 'prom-client';
import { createFleet, createPlatformClientFromConfig, guardPlatform, type PlatformClient } from '@mcb/core/platform';
import { merchantKeys } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';

/**
 * Each merchant's guarded platform client, by ref; each registers its own release (and its fleet's). Each merchant's
 * fleet series go to a registry of its own labelled `merchant` (its ref; `default` without MERCHANTS_FILE), which
 * `metrics` serves merged with the process's; `registries` holds them for the merchant's other series (its sweeps).
 */
export function createConsolePlatforms(deps: {
  config: Config;
  redis: RedisClient;
  registry: Registry;
  logger: Logger;
  releasers: Releasers;
}): {
  platforms: Map<string, PlatformClient>;
  registries: Map<string, Registry>;
  metrics: () => Promise<{ contentType: string; body: string }>;
} {
  const { config, releasers } = deps;
  const platforms = new Map<string, PlatformClient>();
  const registries = new Map<string, Registry>();
  for (const merchant of config.merchants) {
    const registry = new Registry();
    registry.setDefaultLabels({ app: 'console', merchant: merchant.ref });
    registries.set(merchant.ref, registry);
    const named = (what: string) => (config.merchants.length === 1 ? what : `${what} ${merchant.ref}`);
    const maxRps = merchant.getOrderRps ?? config.PLATFORM_MAX_RPS;
    const fleet = createFleet({
      redis: deps.redis,
      keys: merchantKeys(config.QUEUE_PREFIX, merchant.ref).fleet,
      scope: merchant.ref,
      maxRps,
      registry,
      logger: deps.logger.child({ merchant: merchant.ref }),
    });
    releasers.add(named('fleet budget'), () => fleet.close());
    const platform = guardPlatform(createPlatformClientFromConfig(config, { merchant }), { fleet, maxWaitMs: 5000 });
    releasers.add(named('platform'), () => platform.close());
    platforms.set(merchant.ref, platform);
  }
  const metrics = async () => {
    const all = await Promise.all([deps.registry, ...registries.values()].map((r) => r.getMetricsAsJSON()));
    return { contentType: deps.registry.contentType, body: await AggregatorRegistry.aggregate(all).metrics() };
  };
  return { platforms, registries, metrics };
}
