import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { uniquePrefix } from '@mcb/testkit';
import { Redis } from 'ioredis';
import {
  DURABLE_REDIS_ARGS,
  MERCHANT_NO,
  startIngest,
  startOwnRedis,
  type OwnRedis,
  type TestIngest,
} from '@mcb/testkit/ingest';

// A private, durable Redis (AOF, fsync always) this file can make refuse writes; the shared one is never touched.
const keys = generateKeyPair();
let redis: OwnRedis;
let admin: Redis;
let ingest: TestIngest;

beforeAll(async () => {
  redis = await startOwnRedis(DURABLE_REDIS_ARGS);
  admin = new Redis(redis.url);
  ingest = await startIngest({
    redisUrl: redis.url,
    prefix: uniquePrefix('batch'),
    keyRing: loadKeyRing([keys.privateKeyPem]),
  });
});
afterAll(async () => {
  await ingest?.close();
  admin?.disconnect();
  await redis?.destroy();
});

const body = (orderNo: string) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      { OrderNo: orderNo, MerchantNo: MERCHANT_NO, MerchantOrderNo: `m-${orderNo}`, PayTime: null, state: 4 },
      keys.publicKeyPem,
    ),
  });
// All requests are decrypted first, then sent in one tick: they reach the enqueue together, as a burst would.
const burst = async (orderNos: string[]) => {
  const payloads = orderNos.map(body);
  const replies = await Promise.all(
    payloads.map((payload) =>
      ingest.app.inject({
        method: 'POST',
        url: '/callbacks',
        headers: { 'content-type': 'application/json' },
        payload,
      }),
    ),
  );
  return replies.map((r) => `${r.statusCode} ${r.body}`);
};
const batchSizes = async () => {
  const metric = (await ingest.registry.getSingleMetric('ingest_enqueue_batch_size')!.get()).values;
  const count =
    metric.find((v) => (v as { metricName?: string }).metricName === 'ingest_enqueue_batch_size_count')?.value ?? 0;
  const sum =
    metric.find((v) => (v as { metricName?: string }).metricName === 'ingest_enqueue_batch_size_sum')?.value ?? 0;
  return { count, sum };
};

/** One raw keep-alive connection to ingest's port, and the status line of each reply it gets. */
async function openConnection(
  port: number,
): Promise<{ socket: Socket; replies: string[]; replied: (n: number) => Promise<void> }> {
  const socket = connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const replies: string[] = [];
  let waiting: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    for (const m of chunk.toString('latin1').matchAll(/HTTP\/1\.1 (\d{3})[^\r]*\r\n[\s\S]*?\r\n\r\n(success|fail)/g))
      replies.push(`${m[1]} ${m[2]}`);
    waiting?.();
  });
  const replied = async (n: number) => {
    while (replies.length < n) await new Promise<void>((resolve) => (waiting = resolve));
  };
  return { socket, replies, replied };
}

describe('ingest stores callbacks that arrive together in one batch', () => {
  it('stores callbacks read in one poll of its sockets (separate connections) as one batch, not one each', async () => {
    // Each connection's request is its own callback in Node; gathered per turn of the event loop, they still go
    // together. Gathered per microtask run, the first four would each take a transaction of their own (4 in flight).
    await ingest.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (ingest.app.server.address() as { port: number }).port;
    const connections = await Promise.all(Array.from({ length: 8 }, () => openConnection(port)));
    // Every connection is accepted and idle before the burst (a first request on each, one at a time).
    for (const [i, c] of connections.entries()) {
      const payload = body(`W${i}`);
      c.socket.write(
        `POST /callbacks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
      );
      await c.replied(1);
    }
    const before = await batchSizes();
    // The burst: written in one synchronous run, so ingest finds all eight readable in the same poll.
    connections.forEach((c, i) => {
      const payload = body(`P${i}`);
      c.socket.write(
        `POST /callbacks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
      );
    });
    await Promise.all(connections.map((c) => c.replied(2)));
    for (const c of connections) {
      expect(c.replies).toEqual(['200 success', '200 success']);
      c.socket.destroy();
    }
    const after = await batchSizes();
    expect(after.sum - before.sum).toBe(8);
    expect(after.count - before.count).toBeLessThanOrEqual(2);
    for (let i = 0; i < 8; i++) expect((await ingest.queue.getJob(`payout-P${i}-4`))?.data.orderNo).toBe(`P${i}`);
  });

  it('acknowledges each of a burst once the batch is stored, in fewer batches than requests', async () => {
    const before = await batchSizes();
    const nos = Array.from({ length: 40 }, (_, i) => `B${i}`);
    expect(await burst(nos)).toEqual(nos.map(() => '200 success'));
    const after = await batchSizes();
    expect(after.sum - before.sum).toBe(40);
    expect(after.count - before.count).toBeLessThan(40);
    for (const no of nos) expect((await ingest.queue.getJob(`payout-${no}-4`))?.data.orderNo).toBe(no);
    // The same burst again: duplicates are no-op adds, and still a success.
    expect(await burst(nos)).toEqual(nos.map(() => '200 success'));
  });

  it('answers 503 fail to every request of a batch that Redis refuses, success to none, and stores none', async () => {
    // Redis refuses every write while it lacks a replica: the whole batch fails.
    await admin.config('SET', 'min-replicas-to-write', '1');
    try {
      const nos = Array.from({ length: 30 }, (_, i) => `F${i}`);
      expect(await burst(nos)).toEqual(nos.map(() => '503 fail'));
      for (const no of nos) expect(await ingest.queue.getJob(`payout-${no}-4`)).toBeUndefined();
    } finally {
      await admin.config('SET', 'min-replicas-to-write', '0');
    }
    // Writes allowed again: the platform's retry of the same callbacks succeeds.
    expect(await burst(['F0', 'F1'])).toEqual(['200 success', '200 success']);
  });
});
