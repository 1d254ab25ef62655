/** Helpers of the ingest tests: a configured app on a queue, and a private redis-server the test may kill. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { KeyRing } from '@mcb/core/callback';
import { loadConfig, type Config } from '@mcb/core/config';
import { createLogger, type Logger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { waitFor } from '@mcb/testkit';
import { buildApp, type IngestApp } from '../src/app.ts';

export const MERCHANT_NO = 'M100001';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export function ingestConfig(env: Record<string, string>): Config {
  return loadConfig({ MERCHANT_NO, MERCHANT_PRIVATE_KEY_FILE: '/unused-in-tests.pem', LOG_LEVEL: 'silent', ...env }, 'ingest');
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

/** A private redis-server (never the shared one) that a test may kill and restart on the same port. */
export interface OwnRedis {
  url: string;
  port: number;
  /** Kill -9, as in a crash; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Start again on the same port and directory (AOF replayed when enabled). */
  start(): Promise<void>;
  /** Kill and remove the data directory. */
  destroy(): Promise<void>;
}

export async function startOwnRedis(args: string[]): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'mcb-redis-'));
  let child: ChildProcess | undefined;
  const url = `redis://127.0.0.1:${port}`;
  const start = async () => {
    child = spawn('/usr/bin/redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args], {
      stdio: 'ignore',
    });
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {}); // refused connections are expected until the server is up
    try {
      await waitFor(async () => {
        if (probe.status !== 'ready') await probe.connect().catch(() => undefined);
        return (await probe.ping().catch(() => '')) === 'PONG';
      }, { timeoutMs: 10_000, message: `redis-server on ${port} did not start` });
    } finally {
      probe.disconnect();
    }
  };
  const kill = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  };
  await start();
  return {
    url,
    port,
    kill,
    start,
    destroy: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Durable settings, as docker-compose.yml runs Redis. */
export const DURABLE_REDIS_ARGS = ['--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction'];
