import { generateKeyPair, encryptRecord, loadKeyRing } from '@mcb/core/callback';
import { PayinState } from '@mcb/core/spec';
import { createLogger } from '@mcb/core/logger';
import {
  DURABLE_REDIS_ARGS,
  lineSink,
  startFakePlatform,
  startOwnRedis,
  uniquePrefix,
  useTestEnv,
  waitFor,
  type FakePlatform,
  type OwnRedis,
} from '@mcb/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';
import { startHarness, type Harness } from '@mcb/testkit/worker';

// Finding: a Redis at maxmemory (noeviction) refuses every BullMQ script with OOM; the worker spun on it and ingest
// stayed "ready". Now ingest refuses callbacks (503, readiness fails) while headroom is still left, the worker backs
// off instead of spinning, and once memory is raised the backlog is credited with nobody restarting anything.
const env = useTestEnv();
const keys = generateKeyPair();
const ORDERS = 4000;
let redis: OwnRedis;
let admin: Redis;
let platform: FakePlatform;
let ingest: TestIngest;
let worker: Harness | undefined;
const prefix = uniquePrefix('oom');
const workerLog = lineSink();

beforeAll(async () => {
  redis = await startOwnRedis([...DURABLE_REDIS_ARGS, '--maxmemory', '6mb', '--maxmemory-policy', 'noeviction']);
  admin = new Redis(redis.url);
  platform = await startFakePlatform();
  await env.db.pool.query(
    `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, request_hash)
     select $2, 'M-OOM-' || g, 'payin', 'PHP', 10, md5(g::text) from generate_series(1, $1::int) g`,
    [ORDERS, MERCHANT_NO],
  );
  for (let i = 1; i <= ORDERS; i++) {
    platform.setOrder({
      orderNo: `P-OOM-${i}`,
      merchantNo: MERCHANT_NO,
      merchantOrderNo: `M-OOM-${i}`,
      type: 'payin',
      state: PayinState.Released,
      amountJson: '10',
      currency: 'PHP',
    });
  }
  ingest = await startIngest({
    redisUrl: redis.url,
    prefix,
    keyRing: loadKeyRing([keys.privateKeyPem]),
    env: { INGEST_REDIS_MIN_HEADROOM: '0.3' },
    memoryCheckIntervalMs: 50,
  });
});
afterAll(async () => {
  await worker?.close();
  await ingest?.close();
  admin?.disconnect();
  await platform?.close();
  await redis?.destroy();
});

const body = (i: number) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      `{"OrderNo":"P-OOM-${i}","MerchantNo":"${MERCHANT_NO}","MerchantOrderNo":"M-OOM-${i}","PayTime":"2026-01-02T03:04:05","OrderState":6,"Quantity":1.5,"FiatCurrency":10}`,
      keys.publicKeyPem,
    ),
  });
const post = async (i: number) =>
  (
    await ingest.app.inject({
      method: 'POST',
      url: '/callbacks/payin',
      headers: { 'content-type': 'application/json' },
      payload: body(i),
    })
  ).statusCode;
const oomErrors = async () => Number(/errorstat_OOM:count=(\d+)/.exec(await admin.info('errorstats'))?.[1] ?? 0);

describe('Redis at its memory limit', () => {
  const accepted: number[] = [];

  it('ingest answers 503 and fails readiness before Redis refuses a write', async () => {
    let refused = 0;
    for (let i = 1; i <= ORDERS && refused < 20; i += 20) {
      const statuses = await Promise.all(Array.from({ length: 20 }, (_, k) => post(i + k)));
      statuses.forEach((s, k) =>
        s === 200 ? accepted.push(i + k) : s === 503 ? refused++ : expect.fail(`status ${s}`),
      );
    }
    expect(accepted.length).toBeGreaterThan(100);
    expect(refused).toBeGreaterThanOrEqual(20);
    expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    expect(await oomErrors()).toBe(0);
    expect(await ingest.queue.count()).toBe(accepted.length);
  }, 120_000);

  it('a worker facing a Redis over its limit backs off instead of spinning', async () => {
    // Push Redis over its limit, as if the headroom were exhausted by other writers.
    const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1]);
    await admin.config('SET', 'maxmemory', String(Math.floor(used * 0.8)));
    const started = Date.now();
    worker = await startHarness({ ...env, redisUrl: redis.url, prefix }, platform.url, {
      concurrency: 16,
      releaseReviewedJobIds: true,
      logger: createLogger({ name: 'worker-test', level: 'info', destination: workerLog.destination }),
    });
    // Pauses of 0.5 s, then 1 s, then 2 s: the third pause cannot begin before ~1.5 s. Without backoff the worker
    // would meet thousands of OOM refusals in that time; with it, each pause costs one round of refusals.
    const backoff = async () => (await worker!.metrics.redisOomBackoff.get()).values[0]?.value ?? 0;
    const refusals = async () => (await worker!.metrics.redisOom.get()).values[0]?.value ?? 0;
    await waitFor(async () => (await backoff()) >= 2, {
      timeoutMs: 20_000,
      message: 'the worker never reached its third pause',
    });
    expect(Date.now() - started).toBeGreaterThan(1400);
    expect(await refusals()).toBeGreaterThanOrEqual(3);
    expect(await refusals()).toBeLessThan(200);
    // Log volume bounded too: at most one error line per 10 s for the OOM, however many refusals.
    expect(workerLog.lines.filter((l) => l.includes('Redis is out of memory')).length).toBeLessThanOrEqual(1);
  }, 60_000);

  it('credits the whole backlog once memory is raised, and ingest accepts again, with nobody restarting anything', async () => {
    await admin.config('SET', 'maxmemory', '0');
    await waitFor(
      async () =>
        Number((await env.db.pool.query('select count(*) as n from callback_receipts')).rows[0].n) === accepted.length,
      { timeoutMs: 90_000, intervalMs: 200, message: 'backlog not credited' },
    );
    const { rows } = await env.db.pool.query(`select count(*) as n from orders where status = 'credited'`);
    expect(Number(rows[0].n)).toBe(accepted.length);
    expect((await worker!.metrics.redisOomBackoff.get()).values[0]?.value).toBe(0);
    await waitFor(async () => (await ingest.app.inject({ method: 'GET', url: '/readyz' })).statusCode === 200, {
      timeoutMs: 5000,
    });
    expect(await post(ORDERS)).toBe(200);
  }, 120_000);
});
