/**
 * The benchmark's own redis-server: AOF with `appendfsync always` (production's setting, so the figures include
 * what production pays per acknowledged callback), on a free port, data in a temporary directory removed at the end.
 * The shared Redis on 6379 is never touched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { findExecutable } from '@mcb/testkit/run-as';
import { freePort, launch, type Child } from './proc.ts';
import { sleep } from './progress.ts';

export interface BenchRedis {
  url: string;
  port: number;
  child: Child;
  /** A plain client for the benchmark's own bookkeeping (INFO, FLUSHALL between phases). */
  admin: Redis;
  /** The directory its AOF is written to. */
  dir: string;
  /** Bytes of `used_memory`. */
  usedMemory: () => Promise<number>;
  /**
   * Redis's own record (LATENCY HISTORY aof-fsync-always, kept per second at 5 ms and more) of fsyncs that held its
   * event loop since `since` (a Date.now()): every client waits for them, acknowledged callbacks included.
   */
  fsyncStalls: (since: number) => Promise<FsyncStalls>;
  flush: () => Promise<void>;
  close: () => Promise<void>;
}

/** Seconds in which Redis's AOF fsync took 5 ms or more, and the slowest of them. */
export interface FsyncStalls {
  seconds: number;
  worstMs: number;
}

/** BENCH_REDIS_SERVER, else `redis-server` on PATH (Debian's /usr/bin, Homebrew's). */
export const REDIS_SERVER = process.env.BENCH_REDIS_SERVER ?? findExecutable('redis-server') ?? '/usr/bin/redis-server';

export async function startRedis(): Promise<BenchRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'mcb-bench-redis-'));
  const port = await freePort();
  const child = launch({
    name: 'redis-server',
    command: REDIS_SERVER,
    args: [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--maxmemory-policy',
      'noeviction',
      '--loglevel',
      'warning',
      '--latency-monitor-threshold',
      '5',
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
  const fsyncStalls = async (since: number): Promise<FsyncStalls> => {
    const history = (await ready.call('LATENCY', 'HISTORY', 'aof-fsync-always')) as Array<[number, number]>;
    const recent = history.filter(([at]) => at * 1000 >= since - 1000);
    return { seconds: recent.length, worstMs: recent.reduce((w, [, ms]) => Math.max(w, ms), 0) };
  };
  return {
    url,
    port,
    child,
    admin: ready,
    dir,
    usedMemory,
    fsyncStalls,
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
