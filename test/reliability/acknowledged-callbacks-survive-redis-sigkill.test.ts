import { uniquePrefix } from '@mcb/testkit';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startIngest, type TestIngest } from '@mcb/testkit/ingest';
import { callbackBody, payinRecord } from './helpers/callbacks.ts';
import { createTestKeys, type TestKeys } from './helpers/keys.ts';
import { DURABLE_REDIS_ARGS, startOwnRedis, type OwnRedis } from '@mcb/testkit';

// DESIGN invariant 1: an acknowledged callback survives a Redis crash. Ingest acknowledges N callbacks, Redis is
// SIGKILLed right after the last reply and restarted from its AOF: all N jobs are there. The control case runs the
// same steps on a Redis without AOF (ingest told to allow it) and loses them, so the count really measures loss.
const MERCHANT_NO = 'M100001';
const N = 200;
const CONCURRENCY = 20;

async function acknowledgeAndCrash(
  redisArgs: string[],
  env: Record<string, string>,
): Promise<{ acked: number; survived: number }> {
  const keys: TestKeys = createTestKeys();
  let redis: OwnRedis | undefined;
  let ingest: TestIngest | undefined;
  const prefix = uniquePrefix('rel-durable');
  try {
    redis = await startOwnRedis(redisArgs);
    ingest = await startIngest({ redisUrl: redis.url, prefix, keyRing: keys.keyRing, env });
    const bodies = Array.from({ length: N }, () => callbackBody(payinRecord(MERCHANT_NO), keys.publicKeyPem));
    // 1. N callbacks, CONCURRENCY at a time; every one must be acknowledged.
    for (let i = 0; i < N; i += CONCURRENCY) {
      const replies = await Promise.all(
        bodies.slice(i, i + CONCURRENCY).map((payload) =>
          ingest!.app.inject({
            method: 'POST',
            url: '/callbacks',
            headers: { 'content-type': 'application/json' },
            payload,
          }),
        ),
      );
      for (const r of replies) expect([r.statusCode, r.body]).toEqual([200, 'success']);
    }
    // The harness's producer connection reconnects while Redis is down; its errors are expected here.
    ingest.redis.on('error', () => {});
    // 2. SIGKILL at once: no shutdown, no BGREWRITEAOF, no chance to flush anything after the last reply.
    await redis.kill();
    // 3. Restart on the same port and directory; PING answers only after the AOF is loaded.
    await redis.start();
    const probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    try {
      const ids = await probe.lrange(`${prefix}:callbacks:wait`, 0, -1);
      const pipeline = probe.pipeline();
      for (const id of ids) pipeline.hget(`${prefix}:callbacks:${id}`, 'data');
      const datas = ((await pipeline.exec()) ?? []).map(([, v]) => v as string | null);
      // A job counts only with its data hash: an id in the list without its payload would be a lost callback.
      return { acked: N, survived: new Set(ids.filter((_, i) => datas[i] !== null)).size };
    } finally {
      probe.disconnect();
    }
  } finally {
    await ingest?.close().catch(() => undefined);
    await redis?.destroy();
    keys.remove();
  }
}

describe('durability: acknowledged callbacks survive a Redis SIGKILL', () => {
  it(`all ${N} acknowledged jobs are in Redis after SIGKILL right after the last reply and a restart from the AOF`, async () => {
    const { acked, survived } = await acknowledgeAndCrash(DURABLE_REDIS_ARGS, {});
    console.log(
      `durability: ${acked} acknowledged, SIGKILL, restart from AOF (appendfsync always): ${survived} jobs found`,
    );
    expect(survived).toBe(acked);
  });

  it('control: without AOF (volatile Redis explicitly allowed) the same steps lose the acknowledged jobs', async () => {
    const { acked, survived } = await acknowledgeAndCrash(['--appendonly', 'no', '--maxmemory-policy', 'noeviction'], {
      INGEST_ALLOW_VOLATILE_REDIS: 'true',
    });
    console.log(
      `durability control: ${acked} acknowledged on a Redis without AOF, SIGKILL, restart: ${survived} jobs found`,
    );
    expect(survived).toBeLessThan(acked);
  });
});
