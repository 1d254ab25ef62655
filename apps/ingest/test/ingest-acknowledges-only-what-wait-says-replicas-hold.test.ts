import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { startRespProxy, uniquePrefix, waitFor, type RespProxy } from '@mcb/testkit';
import {
  DURABLE_REDIS_ARGS,
  MERCHANT_NO,
  startIngest,
  startOwnRedis,
  type OwnRedis,
  type TestIngest,
} from '@mcb/testkit/ingest';

// INGEST_MIN_REPLICAS=1: a callback is acknowledged only once `WAIT` says a replica holds its batch. The replica poll
// (readiness, early 503s) is not enough: a replica can be listed online while it holds nothing new (paused, its link
// stalled), and the primary keeps listing it until repl-timeout (60 s). These tests keep the poll an hour apart and
// the replica listed online, so only the batch's own WAIT can refuse. A test-started primary and replica, never the
// shared Redis.

const keys = generateKeyPair();
const keyRing = loadKeyRing([keys.privateKeyPem]);
const AN_HOUR = 3_600_000;
let primary: OwnRedis;
let replica: OwnRedis;
let admin: Redis;
let proxy: RespProxy;
/** What the proxy's WAIT answers: forwarded to the primary, or a count of replicas of the test's choosing. */
let waitReply: 'forward' | number = 'forward';

const callback = (orderNo: string) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      { OrderNo: orderNo, MerchantNo: MERCHANT_NO, MerchantOrderNo: `m-${orderNo}`, PayTime: null, state: 4 },
      keys.publicKeyPem,
    ),
  });
const post = (ingest: TestIngest, orderNo: string) =>
  ingest.app
    .inject({
      method: 'POST',
      url: '/callbacks',
      headers: { 'content-type': 'application/json' },
      payload: callback(orderNo),
    })
    .then((r) => `${r.statusCode} ${r.body}`);
/** The platform's way: send until `success` (the first send can miss the 1 s budget on a loaded machine). */
const acknowledged = (ingest: TestIngest, orderNo: string) =>
  waitFor(async () => (await post(ingest, orderNo)) === '200 success', {
    timeoutMs: 15_000,
    intervalMs: 100,
    message: `${orderNo} never acknowledged`,
  });
const replicaListedOnline = async () => /slave0:.*state=online/.test(await admin.info('replication'));

beforeAll(async () => {
  primary = await startOwnRedis(DURABLE_REDIS_ARGS);
  replica = await startOwnRedis([...DURABLE_REDIS_ARGS, '--replicaof', '127.0.0.1', String(primary.port)]);
  admin = new Redis(primary.url);
  await waitFor(replicaListedOnline, { timeoutMs: 15_000, message: 'replica never online' });
  proxy = await startRespProxy(primary.url, (args) =>
    args[0] === 'WAIT' && waitReply !== 'forward' ? { reply: waitReply } : { forward: true },
  );
}, 60_000);
afterAll(async () => {
  const pid = replica?.pid();
  if (pid) process.kill(pid, 'SIGCONT');
  admin?.disconnect();
  await proxy?.close();
  await replica?.destroy();
  await primary?.destroy();
});

async function ingestVia(url: string): Promise<TestIngest> {
  return startIngest({
    redisUrl: url,
    prefix: uniquePrefix('wait'),
    keyRing,
    env: { INGEST_MIN_REPLICAS: '1' },
    durabilityCheckIntervalMs: AN_HOUR,
    memoryCheckIntervalMs: AN_HOUR,
  });
}

describe('INGEST_MIN_REPLICAS: each batch waits for WAIT', () => {
  it('a WAIT that reports fewer replicas than INGEST_MIN_REPLICAS is not acknowledged, though the replica is listed online', async () => {
    const ingest = await ingestVia(proxy.url);
    try {
      await acknowledged(ingest, 'W-1');
      waitReply = 0;
      const waits = proxy.counts.get('WAIT') ?? 0;
      try {
        expect(await post(ingest, 'W-2')).toBe('503 fail');
        expect((proxy.counts.get('WAIT') ?? 0) - waits).toBe(1);
        // The poll's view is unchanged: the refusal came from the batch.
        expect(await replicaListedOnline()).toBe(true);
        expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
          checks: { replicas: '1 online, 1 required' },
        });
      } finally {
        waitReply = 'forward';
      }
      // The platform's retry, once a replica holds the batch again.
      await acknowledged(ingest, 'W-2');
    } finally {
      await ingest.close();
    }
  });

  it('a replica that stops acknowledging (paused) while the primary still lists it online: 503 fail, then success once it resumes', async () => {
    const ingest = await ingestVia(primary.url);
    const pid = replica.pid()!;
    try {
      await acknowledged(ingest, 'W-P1');
      process.kill(pid, 'SIGSTOP');
      expect(await post(ingest, 'W-P2')).toBe('503 fail');
      expect(await replicaListedOnline()).toBe(true);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    try {
      await acknowledged(ingest, 'W-P2');
    } finally {
      await ingest.close();
    }
  });
});
