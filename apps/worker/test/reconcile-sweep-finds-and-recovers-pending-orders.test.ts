import { createDb, orders, reviews } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry } from '@mcb/core/metrics';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import { type FakePlatform, MERCHANT_NO, platformOrder, startFakePlatform, uid, useTestEnv } from '@mcb/testkit';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createReconcileMetrics, runSweep, type SweepDeps, type SweepSettings } from '@mcb/settlement';
import { orderState } from '@mcb/testkit/worker';
import { merchantKeys } from '@mcb/core/queue';

const env = useTestEnv();
let fake: FakePlatform;
let platform: PlatformClient;
let redis: Redis;
const logger = createLogger({
  name: 'reconcile-test',
  level: (process.env.TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent',
});
const HOUR = 3600_000;
const DAY = 24 * HOUR;
const defaults: SweepSettings = { minAgeMs: 10 * 60_000, maxAgeMs: 7 * DAY, ratePerSecond: 1000, batchSize: 100 };

/** Get order calls as the sweep made them: merchant order number and start time. */
const calls: { no: string; at: number }[] = [];
function recording(client: PlatformClient): PlatformClient {
  return {
    getOrder: (no, opts) => {
      calls.push({ no, at: performance.now() });
      return client.getOrder(no, opts);
    },
    getPaymentMethods: (opts) => client.getPaymentMethods(opts),
    close: () => client.close(),
  };
}

function deps(overrides: Partial<SweepDeps> = {}, settings: Partial<SweepSettings> = {}): SweepDeps {
  return {
    db: env.db.db,
    platform: recording(platform),
    logger,
    redis,
    lockKey: merchantKeys(env.prefix).sweepLock,
    merchantNo: MERCHANT_NO,
    settings: { ...defaults, ...settings },
    ...overrides,
  };
}

/** One of our orders, created `ageMs` ago (or at an exact Postgres timestamp). */
async function order(o: {
  kind: 'payin' | 'payout';
  amount?: string;
  ageMs?: number;
  createdAt?: string;
  no?: string;
}): Promise<string> {
  const no = o.no ?? `${o.kind === 'payin' ? 'PI' : 'PO'}-${uid()}`;
  const createdAt = o.createdAt
    ? sql`${o.createdAt}::timestamptz`
    : sql`now() - make_interval(secs => ${(o.ageMs ?? HOUR) / 1000})`;
  await env.db.db.insert(orders).values({
    merchantOrderNo: no,
    kind: o.kind,
    amount: o.amount ?? '100.00',
    currency: 'PHP',
    requestHash: `test-${no}`,
    createdAt,
  });
  return no;
}

function platformHas(no: string, kind: 'payin' | 'payout', state: number, amountJson = '100'): void {
  fake.setOrder(platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: kind, state, amountJson }));
}

beforeAll(async () => {
  fake = await startFakePlatform();
  platform = createPlatformClient({ baseUrl: fake.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
  redis = createRedis(env.redisUrl, 'worker');
});
afterAll(async () => {
  await platform?.close();
  await fake?.close();
  await redis?.quit();
});
beforeEach(async () => {
  calls.length = 0;
  // The trail refuses DELETE and TRUNCATE (migrations 0002, 0007); a superuser's reset sets the replica role first,
  // which skips those triggers for this transaction only (the test harness connects as postgres).
  await env.db.pool.query(
    'begin; set local session_replication_role = replica; truncate orders, callback_receipts, ledger_entries, order_events, reviews, reconcile_unknown_orders restart identity cascade; commit',
  );
});

describe('the reconciliation sweep', () => {
  it('looks up only pending orders created between RECONCILE_MAX_AGE and RECONCILE_MIN_AGE ago', async () => {
    const young = await order({ kind: 'payin', ageMs: 5 * 60_000 });
    const inWindow = await order({ kind: 'payin', ageMs: HOUR });
    const oldButIn = await order({ kind: 'payout', ageMs: 6 * DAY });
    const tooOld = await order({ kind: 'payin', ageMs: 8 * DAY });
    for (const no of [young, inWindow, oldButIn, tooOld]) platformHas(no, no.startsWith('PI') ? 'payin' : 'payout', 1);

    const report = await runSweep(deps());

    expect(calls.map((c) => c.no).sort()).toEqual([inWindow, oldButIn].sort());
    expect(report).toMatchObject({
      scanned: 2,
      stillPending: 2,
      unknown: 0,
      errors: 0,
      reviews: 0,
      beyondMaxAge: 1,
      stoppedEarly: false,
    });
    expect(report.recovered).toEqual({ credited: 0, succeeded: 0, refused: 0 });
    // Not final is simply left pending: no review, no receipt.
    expect(await env.db.db.select().from(reviews)).toHaveLength(0);
    expect((await orderState(env.db.db, inWindow)).order.status).toBe('pending');
  });

  it('finalises what Get order reports final, through the callback path, and counts unknown orders without a review', async () => {
    const released = await order({ kind: 'payin' });
    const success = await order({ kind: 'payin' });
    const paid = await order({ kind: 'payout' });
    const refused = await order({ kind: 'payout' });
    const unknown = await order({ kind: 'payin' });
    platformHas(released, 'payin', 6, '100.00');
    platformHas(success, 'payin', 3, '100');
    platformHas(paid, 'payout', 4);
    platformHas(refused, 'payout', 5);
    // `unknown` is not on the platform: Get order answers 40404.
    const registry = createMetricsRegistry('reconcile-test');
    const reconcileMetrics = createReconcileMetrics(registry);

    const report = await runSweep(deps({ reconcileMetrics }));

    expect(report).toMatchObject({ scanned: 5, unknown: 1, stillPending: 0, reviews: 0, errors: 0, duplicates: 0 });
    expect(report.recovered).toEqual({ credited: 2, succeeded: 1, refused: 1 });
    for (const no of [released, success]) {
      const s = await orderState(env.db.db, no);
      expect(s.order.status).toBe('credited');
      expect(s.ledger).toHaveLength(1);
      expect(s.receipts).toHaveLength(1);
      expect(s.receipts[0]).toMatchObject({ source: 'reconcile', orderNo: `P${no}`, outcome: 'credited' });
      expect(s.events.map((e) => e.eventType)).toEqual(['payin.credited']);
    }
    expect((await orderState(env.db.db, success)).receipts[0]!.state).toBe(3);
    expect((await orderState(env.db.db, paid)).order.status).toBe('succeeded');
    expect((await orderState(env.db.db, paid)).ledger).toHaveLength(0);
    expect((await orderState(env.db.db, refused)).ledger).toMatchObject([
      { entryType: 'payout_refund', amount: '100.00' },
    ]);
    expect((await orderState(env.db.db, unknown)).order.status).toBe('pending');
    expect(await env.db.db.select().from(reviews)).toHaveLength(0);
    // One Get order per order: verification reuses the sweep's answer.
    expect(calls).toHaveLength(5);

    const recovered = await reconcileMetrics.recovered.get();
    expect(recovered.values.find((v) => v.labels.kind === 'payin' && v.labels.outcome === 'credited')?.value).toBe(2);
    expect((await reconcileMetrics.sweeps.get()).values).toMatchObject([
      { labels: { trigger: 'manual', result: 'completed' }, value: 1 },
    ]);

    // 2. The next sweep credits nothing again, and leaves the unknown order to its back-off (not asked at once).
    calls.length = 0;
    const again = await runSweep(deps());
    expect(again).toMatchObject({ scanned: 0, unknown: 0, recovered: { credited: 0, succeeded: 0, refused: 0 } });
    expect(calls).toEqual([]);
    expect((await orderState(env.db.db, released)).ledger).toHaveLength(1);
  });

  it('sends a confirmed amount that differs from ours to review and credits nothing', async () => {
    const no = await order({ kind: 'payin', amount: '100.00' });
    platformHas(no, 'payin', 6, '99.99');
    const report = await runSweep(deps());
    expect(report).toMatchObject({ scanned: 1, reviews: 1, recovered: { credited: 0 } });
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('pending');
    expect(s.ledger).toHaveLength(0);
    expect(s.reviews).toMatchObject([{ reasonCode: 'VERIFY_OWN_AMOUNT_MISMATCH', status: 'open' }]);
  });

  it('walks every pending order exactly once across small batches, ties and microsecond timestamps included', async () => {
    const nos: string[] = [];
    // Same created_at for four (ties broken by id), and timestamps a JS Date would round to the same millisecond.
    for (let i = 0; i < 4; i++)
      nos.push(await order({ kind: 'payin', createdAt: '2026-01-01 00:00:00.000000+00', no: `PI-tie-${i}-${uid()}` }));
    for (const us of ['000100', '000400', '000900'])
      nos.push(await order({ kind: 'payin', createdAt: `2026-01-01 00:00:01.${us}+00` }));
    for (const no of nos) platformHas(no, 'payin', 1);

    const now = () => Date.parse('2026-01-01T02:00:00Z');
    const report = await runSweep(deps({ now }, { batchSize: 2 }));

    expect(report.scanned).toBe(7);
    expect(calls.map((c) => c.no).sort()).toEqual([...nos].sort());
  });

  it('spaces its Get order requests at RECONCILE_RATE', async () => {
    const nos = await Promise.all(Array.from({ length: 8 }, () => order({ kind: 'payout' })));
    for (const no of nos) platformHas(no, 'payout', 1);
    const report = await runSweep(deps({}, { ratePerSecond: 20 }));
    expect(report.scanned).toBe(8);
    const starts = calls.map((c) => c.at).sort((a, b) => a - b);
    // 20 per second: one every 50 ms, so 8 requests span at least 350 ms (timers may fire a little early or late).
    expect(starts.at(-1)! - starts[0]!).toBeGreaterThanOrEqual(330);
    for (let i = 1; i < starts.length; i++) expect(starts[i]! - starts[i - 1]!).toBeGreaterThanOrEqual(40);
    expect(report.durationMs).toBeGreaterThanOrEqual(330);
  });

  it('stops early when the platform is down, reports it without reviews, and the next run recovers', async () => {
    const nos = await Promise.all(Array.from({ length: 6 }, () => order({ kind: 'payin' })));
    for (const no of nos) platformHas(no, 'payin', 6);
    // A closed port: every Get order is refused at the TCP level.
    const downFake = await startFakePlatform();
    const down = createPlatformClient({ baseUrl: downFake.url, merchantNo: MERCHANT_NO, timeoutMs: 1000 });
    await downFake.close();
    try {
      const report = await runSweep(deps({ platform: recording(down) }, { concurrency: 1 }));
      expect(report).toMatchObject({
        scanned: 3,
        errors: 3,
        stoppedEarly: true,
        reviews: 0,
        recovered: { credited: 0 },
      });
      expect(report.stopReason).toMatch(/3 failures in a row, the last PLATFORM_UNREACHABLE/);
      expect(report.stopReason).not.toMatch(/127\.0\.0\.1/);
    } finally {
      await down.close();
    }
    expect(await env.db.db.select().from(reviews)).toHaveLength(0);

    const next = await runSweep(deps());
    expect(next).toMatchObject({ scanned: 6, errors: 0, stoppedEarly: false, recovered: { credited: 6 } });
    for (const no of nos) expect((await orderState(env.db.db, no)).ledger).toHaveLength(1);
  });

  it('keeps going past a single platform failure', async () => {
    const [a, b, c] = await Promise.all([
      order({ kind: 'payin', ageMs: 3 * HOUR }),
      order({ kind: 'payin', ageMs: 2 * HOUR }),
      order({ kind: 'payin', ageMs: HOUR }),
    ]);
    for (const no of [a!, b!, c!]) platformHas(no, 'payin', 6);
    fake.failNext(b!, 1, 500);
    const report = await runSweep(deps({}, { concurrency: 1 }));
    expect(report).toMatchObject({ scanned: 3, errors: 1, stoppedEarly: false, recovered: { credited: 2 } });
    expect((await orderState(env.db.db, b!)).order.status).toBe('pending');
  });

  it('reports a database it cannot read as a stop, not a crash', async () => {
    const unreachable = new URL(env.databaseUrl);
    unreachable.port = '1';
    const dead = createDb(unreachable.toString(), { max: 1, connectionTimeoutMs: 500 });
    try {
      const report = await runSweep(deps({ db: dead.db }));
      expect(report).toMatchObject({ scanned: 0, errors: 1, stoppedEarly: true });
      expect(report.stopReason).toBe('reading pending orders failed (DB_UNAVAILABLE)');
    } finally {
      await dead.close();
    }
    // The lock was released: the next sweep runs.
    await expect(runSweep(deps())).resolves.toMatchObject({ stoppedEarly: false });
  });
});
