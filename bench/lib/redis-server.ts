/**
 * The benchmark's own redis-server: AOF with `appendfsync always` (production's setting, so the figures include
 * what production pays per acknowledged callback), on a free port, data in a temporary directory removed at the end.
 * The shared Redis on 6379 is never touched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, launch, type Child } from './proc.ts';
import { sleep } from './progress.ts';

export interface BenchRedis {
  url: string;
  port: number;
  child: Child;
  /** A plain client for the benchmark's own bookkeeping (INFO, FLUSHALL between phases). */
  admin: Redis;
  /** Bytes of `used_memory`. */
  usedMemory: () => Promise<number>;
  flush: () => Promise<void>;
  close: () => Promise<void>;
}

export const REDIS_SERVER = process.env.BENCH_REDIS_SERVER ?? '/usr/bin/redis-server';

export async function startRedis(): Promise<BenchRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'mcb-bench-redis-'));
  const port = await freePort();
  const child = launch({
    name: 'redis-server',
    command: REDIS_SERVER,
    args: [
      '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
      '--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction',
      '--loglevel', 'warning',
    ],
    keepStdout: true,
  });
  const url = `redis://127.0.0.1:${port}`;
  let admin: Redis | undefined;
  const deadline = Date.now() + 10_000;
  while (!admin) {
    const client = new Redis(url, { maxRetriesPerRequest: 3, lazyConnect: true, retryStrategy: () => 100 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.ping();
      admin = client;
    } catch (e) {
      client.disconnect();
      if (Date.now() > deadline) throw new Error(`redis-server did not start: ${String(e)}\n${child.tail()}`);
      await sleep(100);
    }
  }
  const ready = admin;
  const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await ready.info('memory'))?.[1] ?? Number.NaN);
  return {
    url,
    port,
    child,
    admin: ready,
    usedMemory,
    async flush() {
      await ready.flushall();
      // Keep the AOF from growing across phases (a rewrite mid-measurement would add a latency spike of our making).
      await ready.bgrewriteaof().catch(() => {});
      for (let i = 0; i < 100; i++) {
        const info = await ready.info('persistence');
        if (/aof_rewrite_in_progress:0/.test(info) && /aof_rewrite_scheduled:0/.test(info)) break;
        await sleep(100);
      }
    },
    async close() {
      ready.disconnect();
      await child.stop('SIGTERM', 10_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
