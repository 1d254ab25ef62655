import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackJobId, merchantKeys } from '@mcb/core/queue';
import {
  DURABLE_REDIS_ARGS,
  startOwnCluster,
  startOwnRedis,
  uniquePrefix,
  type OwnCluster,
  type OwnRedis,
} from '@mcb/testkit';
import {
  callbackFor,
  payinRecord,
  startMerchantsIngest,
  testMerchant,
  type MerchantsIngest,
  type TestMerchant,
} from '@mcb/testkit/ingest';

// Callbacks that arrive together go to Redis as one batch whichever merchants they are for; each merchant's jobs
// must land in its own queue, and each node written to must confirm what it holds before any is acknowledged. On a
// cluster the merchants' queues are in different slots (their own hash tags), so one transaction cannot hold them.
const merchants = [testMerchant('a', 'M-A'), testMerchant('b', 'M-B'), testMerchant('c', 'M-C')];
const PER_MERCHANT = 10;

/** A burst of PER_MERCHANT genuine callbacks per merchant, interleaved, encrypted first and sent in one tick. */
async function burst(ingest: MerchantsIngest, label: string): Promise<Map<TestMerchant, string[]>> {
  const sent = new Map<TestMerchant, string[]>(merchants.map((m) => [m, []]));
  const requests: { url: string; payload: string }[] = [];
  for (let i = 0; i < PER_MERCHANT; i++) {
    for (const m of merchants) {
      const no = `${label}-${m.ref}-${i}`;
      sent.get(m)!.push(no);
      requests.push({ url: `/callbacks/m/${m.ref}/payin`, payload: callbackFor(m, payinRecord(m, no)) });
    }
  }
  const replies = await Promise.all(
    requests.map((r) =>
      ingest.app.inject({
        method: 'POST',
        url: r.url,
        headers: { 'content-type': 'application/json' },
        payload: r.payload,
      }),
    ),
  );
  expect(replies.map((r) => `${r.statusCode} ${r.body}`)).toEqual(requests.map(() => '200 success'));
  return sent;
}

/** Each merchant's queue holds its own callbacks, with its number, and none of another merchant's. */
async function expectEachInItsOwnQueue(ingest: MerchantsIngest, sent: Map<TestMerchant, string[]>): Promise<void> {
  for (const [m, orderNos] of sent) {
    const queue = ingest.lane(m.ref).queue;
    for (const no of orderNos)
      expect((await queue.getJob(callbackJobId('payin', no, 6)))?.data.merchantNo).toBe(m.merchantNo);
    const others = [...sent].filter(([o]) => o !== m).flatMap(([, nos]) => nos);
    for (const no of others) expect(await queue.getJob(callbackJobId('payin', no, 6))).toBeUndefined();
  }
}

/** Batches stored so far, and how many of them held more callbacks than one merchant sent (so several merchants'). */
async function batches(ingest: MerchantsIngest): Promise<{ count: number; mixed: number }> {
  const values = (await ingest.registry.getSingleMetric('ingest_enqueue_batch_size')!.get()).values;
  const named = (name: string, le?: number) =>
    values.find((v) => (v as { metricName?: string }).metricName === name && (le === undefined || v.labels.le === le))
      ?.value ?? 0;
  const count = named('ingest_enqueue_batch_size_count');
  return { count, mixed: count - named('ingest_enqueue_batch_size_bucket', 8) };
}

describe('a batch of several merchants on one durable Redis (WAITAOF)', () => {
  let redis: OwnRedis;
  let ingest: MerchantsIngest;
  beforeAll(async () => {
    redis = await startOwnRedis(DURABLE_REDIS_ARGS);
    ingest = await startMerchantsIngest({ merchants, prefix: uniquePrefix('mix'), env: { REDIS_URL: redis.url } });
  });
  afterAll(async () => {
    await ingest?.close();
    await redis?.destroy();
  });

  it("stores each merchant's callbacks in its own queue, in fewer batches than requests, some holding several merchants", async () => {
    const sent = await burst(ingest, 'ONE');
    await expectEachInItsOwnQueue(ingest, sent);
    const { count, mixed } = await batches(ingest);
    expect(count).toBeLessThan(merchants.length * PER_MERCHANT);
    expect(mixed).toBeGreaterThan(0);
  });
});

describe('a batch of several merchants on a 3-master Redis Cluster', () => {
  let cluster: OwnCluster;
  let ingest: MerchantsIngest;
  const prefix = `{${uniquePrefix('mix')}}`;
  beforeAll(async () => {
    cluster = await startOwnCluster(3);
    ingest = await startMerchantsIngest({ merchants, prefix, env: { REDIS_CLUSTER_NODES: cluster.nodes } });
  }, 60_000);
  afterAll(async () => {
    await ingest?.close();
    await cluster?.destroy();
  });

  it('puts the merchants on more than one master, and stores and confirms each on its own node', async () => {
    const masters = new Set(
      await Promise.all(
        merchants.map((m) => {
          const keys = merchantKeys(prefix, m.ref);
          return cluster.portOfKey(`${keys.prefix}:${keys.callbacksQueue}:meta`);
        }),
      ),
    );
    expect(masters.size).toBeGreaterThan(1);
    const sent = await burst(ingest, 'CLU');
    await expectEachInItsOwnQueue(ingest, sent);
    expect((await batches(ingest)).mixed).toBeGreaterThan(0);
  });
});
