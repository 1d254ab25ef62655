/** Helpers of the ingest tests: a configured app on a queue, and a private redis-server the test may kill. */
import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { KeyRing } from '@mcb/core/callback';
import { loadConfig, type Config } from '@mcb/core/config';
import { createLogger, type Logger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { buildApp, type IngestApp } from '@mcb/ingest';

// Own redis-servers and free ports, re-exported so ingest tests import one place.
export { freePort } from './free-port.ts';
export { DURABLE_REDIS_ARGS, startOwnRedis, type OwnRedis } from './own-redis.ts';

export const MERCHANT_NO = 'M100001';

export function ingestConfig(env: Record<string, string>): Config {
  return loadConfig(
    { MERCHANT_NO, MERCHANT_PRIVATE_KEY_FILE: '/unused-in-tests.pem', LOG_LEVEL: 'silent', ...env },
    'ingest',
  );
}

/** A logger whose lines the test can read back. */
export function captureLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { logger: createLogger({ name: 'ingest-test', level: 'debug', destination }), lines };
}

/** An ingest app on its own producer connection and queue; `close()` closes all three. */
export interface TestIngest {
  app: IngestApp;
  queue: Queue;
  redis: Redis;
  registry: Registry;
  close(): Promise<void>;
}

export async function startIngest(opts: {
  redisUrl: string;
  prefix: string;
  keyRing: KeyRing;
  env?: Record<string, string>;
  logger?: Logger;
  isShuttingDown?: () => boolean;
  durabilityCheckIntervalMs?: number;
  memoryCheckIntervalMs?: number;
  refusalLogIntervalMs?: number;
}): Promise<TestIngest> {
  const config = ingestConfig({ REDIS_URL: opts.redisUrl, QUEUE_PREFIX: opts.prefix, ...opts.env });
  const redis = createRedis(config.REDIS_URL, 'producer', { connectionName: 'ingest-test' });
  const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: config.QUEUE_PREFIX });
  const registry = new Registry();
  const closeClients = async () => {
    await queue.close();
    redis.disconnect();
  };
  try {
    const app = await buildApp({
      config,
      queue,
      redis,
      logger: opts.logger ?? createLogger({ name: 'ingest-test', level: 'silent' }),
      keyRing: opts.keyRing,
      metricsRegistry: registry,
      isShuttingDown: opts.isShuttingDown,
      durabilityCheckIntervalMs: opts.durabilityCheckIntervalMs,
      memoryCheckIntervalMs: opts.memoryCheckIntervalMs,
      refusalLogIntervalMs: opts.refusalLogIntervalMs,
    });
    return {
      app,
      queue,
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
export * from './ingest-merchants.ts';
