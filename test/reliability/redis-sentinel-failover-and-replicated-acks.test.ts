import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { loadConfig } from '@mcb/core/config';
import { createLogger } from '@mcb/core/logger';
import { Registry } from '@mcb/core/metrics';
import { CALLBACKS_QUEUE } from '@mcb/core/queue';
import { createRedis, redisTargetOf, type RedisClient } from '@mcb/core/redis';
import {
  DURABLE_REDIS_ARGS,
  startOwnRedis,
  startOwnSentinel,
  uniquePrefix,
  waitFor,
  type OwnRedis,
  type OwnSentinelSetup,
} from '@mcb/testkit';
import { buildApp, type IngestApp } from '../../apps/ingest/src/app.ts';

// Outgrowing one Redis host: ingest reaches its Redis through Sentinel and follows a failover without a restart,
// and with INGEST_MIN_REPLICAS it acknowledges a callback only once a replica holds it too. Real redis-server
// processes on free ports (a primary, a replica, a sentinel), never the shared Redis.
const keys = generateKeyPair();
const MERCHANT_NO = 'M100001';
const logger = createLogger({ name: 'ingest-test', level: 'silent' });

interface Running {
  prefix: string;
  app: IngestApp;
  queue: Queue;
  redis: RedisClient;
  close(): Promise<void>;
}

async function ingestOn(env: Record<string, string>): Promise<Running> {
  const config = loadConfig(
    {
      MERCHANT_NO,
      MERCHANT_PRIVATE_KEY_FILE: '/unused.pem',
      LOG_LEVEL: 'silent',
      QUEUE_PREFIX: uniquePrefix('topo'),
      ...env,
    },
    'ingest',
  );
  const redis = createRedis(redisTargetOf(config), 'producer', { connectionName: 'ingest-test' });
  const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: config.QUEUE_PREFIX });
  const app = await buildApp({
    config,
    queue,
    redis,
    logger,
    keyRing: loadKeyRing([keys.privateKeyPem]),
    metricsRegistry: new Registry(),
    durabilityCheckIntervalMs: 200,
  });
  return {
    prefix: config.QUEUE_PREFIX,
    app,
    queue,
    redis,
    async close() {
      await app.close();
      await queue.close();
      redis.disconnect();
    },
  };
}

const post = async (r: Running, orderNo: string) => {
  const payload = JSON.stringify({
    encryptedData: encryptRecord(
      { OrderNo: orderNo, MerchantNo: MERCHANT_NO, MerchantOrderNo: `m-${orderNo}`, PayTime: null, state: 4 },
      keys.publicKeyPem,
    ),
  });
  const res = await r.app.inject({
    method: 'POST',
    url: '/callbacks',
    headers: { 'content-type': 'application/json' },
    payload,
  });
  return `${res.statusCode} ${res.body}`;
};

describe('Redis through Sentinel', () => {
  let setup: OwnSentinelSetup;
  let ingest: Running;
  beforeAll(async () => {
    setup = await startOwnSentinel('mcb');
    ingest = await ingestOn({ REDIS_SENTINELS: setup.sentinels, REDIS_SENTINEL_NAME: setup.name });
  }, 60_000);
  afterAll(async () => {
    await ingest?.close();
    await setup?.destroy();
  });

  it('acknowledges callbacks on the primary, follows a failover without a restart, and loses no acknowledged job', async () => {
    const acked: string[] = [];
    for (let i = 0; i < 20; i++) if ((await post(ingest, `SEN-A-${i}`)) === '200 success') acked.push(`SEN-A-${i}`);
    expect(acked).toHaveLength(20);

    // Replication is asynchronous: the failover must not start before the replica holds what was acknowledged
    // (in production INGEST_MIN_REPLICAS=1 is what guarantees it; docs/deployment.md).
    const onReplica = new Redis(setup.replica.port, '127.0.0.1');
    try {
      const q = new Queue(CALLBACKS_QUEUE, { connection: onReplica, prefix: ingest.prefix });
      await waitFor(async () => (await q.getJob(`payout-${acked.at(-1)}-4`)) !== undefined, {
        timeoutMs: 10_000,
        message: 'not replicated',
      });
      await q.close();
    } finally {
      onReplica.disconnect();
    }
    const newPrimary = await setup.failover();
    expect(newPrimary).toBe(setup.replica.port);
    // During the switch a callback may get 503 (the platform retries it); afterwards every one is acknowledged.
    // The old primary is demoted once the sentinel reconfigures it; until then it may still take a write.
    const old = new Redis(setup.primary.port, '127.0.0.1');
    try {
      await waitFor(async () => /role:slave/.test(await old.info('replication')), {
        timeoutMs: 30_000,
        intervalMs: 100,
        message: 'old primary never demoted',
      });
    } finally {
      old.disconnect();
    }
    await waitFor(async () => (await post(ingest, 'SEN-PROBE')) === '200 success', {
      timeoutMs: 30_000,
      intervalMs: 200,
      message: 'ingest never reached the new primary',
    });
    const after: string[] = [];
    for (let i = 0; i < 20; i++) {
      const reply = await post(ingest, `SEN-B-${i}`);
      after.push(reply);
      if (reply === '200 success') acked.push(`SEN-B-${i}`);
    }
    expect(after).toEqual(Array(20).fill('200 success'));

    // Every acknowledged job is on the node that is primary now.
    const direct = new Redis(setup.replica.port, '127.0.0.1');
    try {
      const q = new Queue(CALLBACKS_QUEUE, { connection: direct, prefix: ingest.prefix });
      const missing: string[] = [];
      for (const no of acked) if (!(await q.getJob(`payout-${no}-4`))) missing.push(no);
      await q.close();
      expect(missing).toEqual([]);
    } finally {
      direct.disconnect();
    }
  }, 90_000);
});

describe('INGEST_MIN_REPLICAS', () => {
  let primary: OwnRedis;
  let replica: OwnRedis;
  let ingest: Running;
  beforeAll(async () => {
    primary = await startOwnRedis(DURABLE_REDIS_ARGS);
    replica = await startOwnRedis([...DURABLE_REDIS_ARGS, '--replicaof', '127.0.0.1', String(primary.port)]);
    const admin = new Redis(primary.url);
    await waitFor(async () => /slave0:.*state=online/.test(await admin.info('replication')), {
      timeoutMs: 15_000,
      message: 'replica never online',
    });
    admin.disconnect();
    ingest = await ingestOn({ REDIS_URL: primary.url, INGEST_MIN_REPLICAS: '1' });
  }, 60_000);
  afterAll(async () => {
    await ingest?.close();
    await replica?.destroy();
    await primary?.destroy();
  });

  it('acknowledges only once a replica holds the job, answers 503 while none does, and recovers by itself', async () => {
    expect(await post(ingest, 'REP-1')).toBe('200 success');
    const onReplica = new Redis(replica.url);
    try {
      const q = new Queue(CALLBACKS_QUEUE, { connection: onReplica, prefix: ingest.prefix });
      expect((await q.getJob('payout-REP-1-4'))?.data.orderNo).toBe('REP-1');
      await q.close();
    } finally {
      onReplica.disconnect();
    }

    await replica.kill();
    expect(await post(ingest, 'REP-2')).toBe('503 fail');
    await waitFor(async () => (await ingest.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 503, {
      timeoutMs: 5000,
      message: '/readyz still ready without a replica',
    });

    await replica.start();
    await waitFor(async () => (await post(ingest, 'REP-2')) === '200 success', {
      timeoutMs: 30_000,
      intervalMs: 200,
      message: 'not acknowledged after the replica came back',
    });
  }, 90_000);

  it('starts while the replica is offline, not ready and refusing callbacks, and becomes ready when it is back', async () => {
    await replica.kill();
    const admin = new Redis(primary.url);
    let late: Running | undefined;
    try {
      await waitFor(async () => !/slave0:.*state=online/.test(await admin.info('replication')), {
        timeoutMs: 15_000,
        message: 'the primary still reports the replica online',
      });
      // A replica down for maintenance must not turn an ingest restart into a crash loop: it starts, and says why it is not ready.
      late = await ingestOn({ REDIS_URL: primary.url, INGEST_MIN_REPLICAS: '1' });
      const ready = await late.app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toMatchObject({ checks: { replicas: '0 online, 1 required', durability: 'aof-always' } });
      expect(await post(late, 'REP-3')).toBe('503 fail');

      await replica.start();
      await waitFor(async () => (await late!.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200, {
        timeoutMs: 30_000,
        intervalMs: 200,
        message: 'not ready after the replica came back',
      });
      expect(await post(late, 'REP-3')).toBe('200 success');
    } finally {
      admin.disconnect();
      await late?.close();
    }
  }, 90_000);
});
