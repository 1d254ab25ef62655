import { randomBytes } from 'node:crypto';
import { createDb, type Db } from '@mcb/core/db';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import type { TestServices } from './services.ts';

export { canConnect, HOW_TO_START, type TestServices } from './services.ts';
export { waitFor, type WaitForOptions } from './wait-for.ts';
export {
  DURABLE_REDIS_ARGS,
  redisServerPath,
  startOwnRedis,
  type OwnRedis,
  type OwnRedisOptions,
} from './own-redis.ts';
export {
  canDieWithParent,
  chownToServerUser,
  commandAs,
  commandOf,
  findExecutable,
  isRoot,
  serverUser,
} from './run-as.ts';
export { findPostgresBinaries, type PostgresBinaries } from './postgres-binaries.ts';
export { freePort } from './free-port.ts';
export { listeningAddresses } from './listening.ts';
export { killQuietly, onProcessExit, stopChild } from './cleanup.ts';
export { lineSink } from './line-sink.ts';
export { createOrder, MERCHANT_NO, payinEvent, payoutEvent, platformOrder, uid } from './fixtures.ts';
export {
  startFakePlatform,
  type CatalogMode,
  type FakeOrder,
  type FakePlatform,
  type FakePlatformOptions,
} from './platform-double.ts';

/** The run's services, as the global setup found them. */
export function testServices(): TestServices {
  return inject('services');
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(testServices().databaseUrl, 'postgres') });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * A fresh database cloned from the run's migrated template. Clones may race on the template ("being accessed
 * by other users"), so creation retries briefly.
 */
export async function createTestDatabase(): Promise<{ name: string; url: string; drop: () => Promise<void> }> {
  const name = `mcb_t_${Date.now()}_${randomBytes(4).toString('hex')}`;
  const template = inject('templateDatabase');
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(`create database "${name}" template "${template}"`);
      break;
    } catch (e) {
      if ((e as { code?: string }).code !== '55006' || attempt >= 50) throw e;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  return {
    name,
    url: withDatabase(testServices().databaseUrl, name),
    drop: () => adminQuery(`drop database if exists "${name}" with (force)`),
  };
}

/** A queue prefix no other test file uses. */
export function uniquePrefix(label = 't'): string {
  return `${label}-${randomBytes(5).toString('hex')}`;
}

/** Delete every Redis key under `prefix:`. */
export async function deletePrefix(redisUrl: string, prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** What {@link useTestEnv} gives a test file. Fields are set in `beforeAll`. */
export interface TestEnv {
  /** URL of this file's own database. */
  databaseUrl: string;
  redisUrl: string;
  /** This file's own BullMQ prefix. */
  prefix: string;
  /** A pool on this file's database. */
  db: Db;
}

/** A {@link TestEnv} opened now, with the close that drops what it made. */
export interface OpenTestEnv extends TestEnv {
  /** Close the pool, delete the prefix's keys, drop the database. */
  close(): Promise<void>;
}

/** Open a test file's isolation now (a fixture's setup): its own database clone, queue prefix and pool. */
export async function openTestEnv(services: TestServices = testServices()): Promise<OpenTestEnv> {
  const created = await createTestDatabase();
  const env: OpenTestEnv = {
    databaseUrl: created.url,
    redisUrl: services.redisUrl,
    prefix: uniquePrefix(),
    db: createDb(created.url, { max: 5, applicationName: 'mcb-test' }),
    async close() {
      await env.db.close();
      await deletePrefix(env.redisUrl, env.prefix);
      await created.drop();
    },
  };
  return env;
}

/**
 * Isolation for one test file: its own database (a clone of the migrated template), its own queue prefix, and a
 * pool on that database; everything is closed and dropped in `afterAll`.
 */
export function useTestEnv(): TestEnv {
  const env = {} as TestEnv;
  let close: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const opened = await openTestEnv();
    close = opened.close;
    Object.assign(env, {
      databaseUrl: opened.databaseUrl,
      redisUrl: opened.redisUrl,
      prefix: opened.prefix,
      db: opened.db,
    });
  });
  afterAll(async () => {
    await close?.();
  });
  return env;
}
export { startOwnSentinel, type OwnSentinelOptions, type OwnSentinelSetup } from './own-sentinel.ts';
export { startOwnCluster, type OwnCluster } from './own-cluster.ts';
export { hasPgBouncer, startOwnPgBouncer, type OwnPgBouncer } from './own-pgbouncer.ts';
export {
  encodeResp,
  startRespProxy,
  type CommandAction,
  type CommandHook,
  type RespProxy,
  type RespValue,
} from './resp-proxy.ts';
export { startTcpProxy, type TcpProxy, type TcpTap } from './tcp-proxy.ts';
export { startLostCommitReplyProxy, type LostCommitReplyProxy } from './lost-commit-reply-proxy.ts';
export { writeMerchantsFile, type MerchantEntry } from './merchants-file.ts';
