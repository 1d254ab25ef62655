import { loadConfig } from '@mcb/core/config';
import { createLogger } from '@mcb/core/logger';
import { merchantKeys } from '@mcb/core/queue';
import {
  createOrder,
  platformOrder,
  startFakePlatform,
  startOwnCluster,
  uniquePrefix,
  useTestEnv,
  waitFor,
  writeMerchantsFile,
  type FakePlatform,
  type OwnCluster,
} from '@mcb/testkit';
import {
  callbackFor,
  payinRecord,
  startMerchantsIngest,
  testMerchant,
  type MerchantsIngest,
  type TestMerchant,
} from '@mcb/testkit/ingest';
import { orderState } from '@mcb/testkit/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWorker, type WorkerRunner } from '../../apps/worker/src/index.ts';

// Issue 50 on a 3-master Redis Cluster: each merchant's queue has a hash tag of its own ({prefix-ref}), so the
// merchants spread over the masters; ingest stores each callback in its merchant's queue on that merchant's master,
// and a worker's lanes credit each merchant's orders once, although both merchants use the same merchant order
// number and the platform gave both pay-ins the same OrderNo.
describe('several merchants on a 3-master Redis Cluster', () => {
  const env = useTestEnv();
  const prefix = `{${uniquePrefix('mclu')}}`;
  let cluster: OwnCluster;
  let merchants: TestMerchant[];
  let platforms: Map<string, FakePlatform>;
  let ingest: MerchantsIngest;
  let worker: WorkerRunner;
  let file: ReturnType<typeof writeMerchantsFile>;

  /** The master holding merchant `ref`'s callbacks queue. */
  const masterOf = (ref: string) => {
    const keys = merchantKeys(prefix, ref);
    return cluster.portOfKey(`${keys.prefix}:${keys.callbacksQueue}:meta`);
  };

  beforeAll(async () => {
    cluster = await startOwnCluster(3);
    // Two refs whose hash tags land on two different masters (the slots depend on this run's prefix).
    const refs = ['a'];
    for (const ref of 'bcdefghijklmnop') {
      if ((await masterOf(ref)) !== (await masterOf(refs[0]!))) {
        refs.push(ref);
        break;
      }
    }
    merchants = refs.map((ref) => testMerchant(ref, `M-CLU-${ref.toUpperCase()}`));
    platforms = new Map();
    for (const m of merchants) platforms.set(m.ref, await startFakePlatform({ merchantNo: m.merchantNo }));
    const redisEnv = { REDIS_CLUSTER_NODES: cluster.nodes };
    ingest = await startMerchantsIngest({ merchants, prefix, env: redisEnv });
    file = writeMerchantsFile(
      merchants.map((m) => ({ ref: m.ref, merchantNo: m.merchantNo, platformBaseUrl: platforms.get(m.ref)!.url })),
    );
    const config = loadConfig(
      {
        ...redisEnv,
        MERCHANTS_FILE: file.path,
        PLATFORM_ALLOW_HTTP: 'true',
        DATABASE_URL: env.databaseUrl,
        QUEUE_PREFIX: prefix,
        WORKER_METRICS_PORT: '0',
        // A callback naming an order nobody registered goes to review at once (no grace period to wait out).
        ORDER_GRACE_PERIOD: '0s',
        LOG_LEVEL: 'silent',
      },
      'worker',
    );
    worker = await runWorker({ config, logger: createLogger({ name: 'cluster-merchants', level: 'silent' }) });
  }, 90_000);

  afterAll(async () => {
    await worker?.stop();
    await ingest?.close();
    await Promise.all([...(platforms?.values() ?? [])].map((p) => p.close()));
    file?.remove();
    await cluster?.destroy();
  });

  it('puts the merchants on two masters and credits each once, at its own amount, with the same numbers', async () => {
    expect(merchants).toHaveLength(2);
    expect(new Set(await Promise.all(merchants.map((m) => masterOf(m.ref)))).size).toBe(2);
    const merchantOrderNo = `SAME-${uniquePrefix('o')}`;
    const orderNo = `P${merchantOrderNo}`;
    const amounts = ['100.00', '7.50'];
    for (const [i, m] of merchants.entries()) {
      await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: amounts[i]!, merchantNo: m.merchantNo });
      platforms.get(m.ref)!.setOrder(
        platformOrder({
          orderNo,
          merchantNo: m.merchantNo,
          merchantOrderNo,
          type: 'payin',
          state: 6,
          amountJson: amounts[i]!,
        }),
      );
    }
    // Every callback twice (the platform's retry), each on its merchant's route.
    for (const [i, m] of merchants.entries()) {
      const body = callbackFor(
        m,
        payinRecord(m, orderNo, { MerchantOrderNo: merchantOrderNo, FiatCurrency: Number(amounts[i]) }),
      );
      for (let copy = 0; copy < 2; copy++) {
        const reply = await ingest.app.inject({
          method: 'POST',
          url: `/callbacks/m/${m.ref}`,
          headers: { 'content-type': 'application/json' },
          payload: body,
        });
        expect([reply.statusCode, reply.body]).toEqual([200, 'success']);
      }
    }
    const stateOf = (m: TestMerchant) => orderState(env.db.db, merchantOrderNo, m.merchantNo);
    for (const m of merchants) {
      await waitFor(async () => (await stateOf(m)).order.status === 'credited', {
        message: `merchant ${m.ref}'s pay-in not credited`,
      });
    }
    for (const [i, m] of merchants.entries()) {
      const state = await stateOf(m);
      expect(state.ledger).toEqual([expect.objectContaining({ entryType: 'payin_credit', amount: amounts[i] })]);
      // Its job ran in its own queue, on its own master.
      const counts = await ingest.lane(m.ref).queue.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed');
      expect(counts).toMatchObject({ completed: 1, failed: 0, waiting: 0, active: 0, delayed: 0 });
      // Get order asked this merchant's platform, with its number.
      expect(platforms.get(m.ref)!.hits.get(merchantOrderNo)).toBeGreaterThan(0);
    }
  });

  it("acknowledges a callback on B's route naming A's order, reviews it in B's name and leaves A's order alone", async () => {
    const [a, b] = merchants as [TestMerchant, TestMerchant];
    const merchantOrderNo = `ONLY-A-${uniquePrefix('o')}`;
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '40.00', merchantNo: a.merchantNo });
    const orderNo = `P${merchantOrderNo}`;
    // A genuine callback of B's key and number (the platform knows no such order of B), naming A's order number.
    const reply = await ingest.app.inject({
      method: 'POST',
      url: `/callbacks/m/${b.ref}`,
      headers: { 'content-type': 'application/json' },
      payload: callbackFor(b, payinRecord(b, orderNo, { MerchantOrderNo: merchantOrderNo, FiatCurrency: 40 })),
    });
    expect([reply.statusCode, reply.body]).toEqual([200, 'success']);
    await waitFor(async () => (await orderState(env.db.db, merchantOrderNo)).reviews.length === 1, {
      message: "no review in B's name",
    });
    const { order, reviews, ledger, receipts } = await orderState(env.db.db, merchantOrderNo);
    expect(reviews).toEqual([expect.objectContaining({ merchantNo: b.merchantNo, status: 'open' })]);
    expect([order.merchantNo, order.status, ledger, receipts]).toEqual([a.merchantNo, 'pending', [], []]);
    // A's platform was never asked about it: B's lane asks B's platform only.
    expect(platforms.get(a.ref)!.hits.get(merchantOrderNo)).toBeUndefined();
  });
});
