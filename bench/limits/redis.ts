/**
 * Limit: Redis round trips per second on the benchmark's own redis-server (AOF, appendfsync always), with ioredis
 * as ingest uses it (one connection, several commands in flight):
 * - PING one at a time (the round trip itself), and with `inFlight` concurrent callers;
 * - a small SET with `inFlight` concurrent callers: each reply waits for the fsync, as an acknowledged callback does.
 */
import { Redis } from 'ioredis';

export interface RedisLimit {
  pingSequential: number;
  pingConcurrent: number;
  durableWritesConcurrent: number;
  inFlight: number;
}

async function rate(ms: number, callers: number, op: (i: number) => Promise<unknown>): Promise<number> {
  let n = 0;
  const t0 = performance.now();
  const stopAt = t0 + ms;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < stopAt) await op(n++);
    }),
  );
  return n / ((performance.now() - t0) / 1000);
}

export async function measureRedis(opts: { url: string; seconds: number; inFlight: number }): Promise<RedisLimit> {
  const redis = new Redis(opts.url, { maxRetriesPerRequest: 1 });
  try {
    const ms = opts.seconds * 1000;
    const value = 'x'.repeat(600); // about the size of one callback job's data
    const pingSequential = await rate(ms, 1, () => redis.ping());
    const pingConcurrent = await rate(ms, opts.inFlight, () => redis.ping());
    const durableWritesConcurrent = await rate(ms, opts.inFlight, (i) => redis.set(`bench:limit:${i}`, value));
    return { pingSequential, pingConcurrent, durableWritesConcurrent, inFlight: opts.inFlight };
  } finally {
    redis.disconnect();
  }
}
