/**
 * Ingest serving several merchants, for tests: each merchant gets a key pair of its own written to a PEM file, the
 * list is written as a MERCHANTS_FILE and read by the config, the rings come from the real loader, and the app gets a
 * lane (queue) per merchant, as main.ts builds them.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encryptRecord, generateKeyPair, type GeneratedKeyPair } from '@mcb/core/callback';
import { loadConfig, type Config } from '@mcb/core/config';
import { createLogger, type Logger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import { createRedis, redisTargetOf, type RedisClient } from '@mcb/core/redis';
import { buildApp, closeLanes, loadKeyRingsFromConfig, openLanes, type IngestApp, type IngestLane } from '@mcb/ingest';

/** One merchant of a test deployment. */
export interface TestMerchant {
  ref: string;
  merchantNo: string;
  keys: GeneratedKeyPair;
  legacyRoutes?: boolean;
}

/** A merchant with a key pair of its own (RSA generation takes a moment: make them once per file). */
export function testMerchant(ref: string, merchantNo: string, legacyRoutes = false): TestMerchant {
  return { ref, merchantNo, keys: generateKeyPair(), legacyRoutes };
}

/** A callback body `{encryptedData}` of `record` encrypted for `merchant` (its public key). */
export function callbackFor(merchant: TestMerchant, record: object): string {
  return JSON.stringify({ encryptedData: encryptRecord(record, merchant.keys.publicKeyPem) });
}

/** A pay-in record of `merchant` (its number unless `merchantNo` says otherwise). */
export function payinRecord(merchant: TestMerchant, orderNo: string, over: Record<string, unknown> = {}): object {
  return {
    OrderNo: orderNo,
    MerchantNo: merchant.merchantNo,
    MerchantOrderNo: `mo-${orderNo}`,
    PayTime: '2026-05-01T08:30:00',
    OrderState: 6,
    Quantity: 1.5,
    FiatCurrency: 10,
    ...over,
  };
}

/** An ingest app serving `merchants`, and what a test reads back. `close()` closes everything it opened. */
export interface MerchantsIngest {
  app: IngestApp;
  config: Config;
  lanes: readonly IngestLane[];
  /** The lane of the merchant `ref`. */
  lane(ref: string): IngestLane;
  redis: RedisClient;
  registry: Registry;
  close(): Promise<void>;
}

/** Start ingest for `merchants` from a MERCHANTS_FILE of theirs; REDIS_URL or REDIS_CLUSTER_NODES in `env`. */
export async function startMerchantsIngest(opts: {
  merchants: readonly TestMerchant[];
  prefix: string;
  env: Record<string, string>;
  logger?: Logger;
}): Promise<MerchantsIngest> {
  const dir = mkdtempSync(join(tmpdir(), 'mcb-merchants-'));
  const entries = opts.merchants.map((m) => {
    const file = join(dir, `${m.ref}.pem`);
    writeFileSync(file, m.keys.privateKeyPem);
    return { ref: m.ref, merchantNo: m.merchantNo, privateKeyFiles: [file], legacyRoutes: m.legacyRoutes ?? false };
  });
  const merchantsFile = join(dir, 'merchants.json');
  writeFileSync(merchantsFile, JSON.stringify({ merchants: entries }));
  const config = loadConfig(
    { MERCHANTS_FILE: merchantsFile, QUEUE_PREFIX: opts.prefix, LOG_LEVEL: 'silent', ...opts.env },
    'ingest',
  );
  const rings = loadKeyRingsFromConfig(config);
  const redis = createRedis(redisTargetOf(config), 'producer', { connectionName: 'ingest-test' });
  const lanes = openLanes(config, redis, rings);
  const registry = new Registry();
  const closeClients = async () => {
    await closeLanes(lanes);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const app = await buildApp({
      config,
      lanes,
      redis,
      logger: opts.logger ?? createLogger({ name: 'ingest-test', level: 'silent' }),
      metricsRegistry: registry,
    });
    return {
      app,
      config,
      lanes,
      lane: (ref) => lanes.find((l) => l.merchant.ref === ref) ?? assertNever(ref),
      redis,
      registry,
      close: async () => {
        await app.close();
        await closeClients();
      },
    };
  } catch (e) {
    await closeClients();
    throw e;
  }
}

function assertNever(ref: string): never {
  throw new Error(`no merchant ${ref} in this test's deployment`);
}
