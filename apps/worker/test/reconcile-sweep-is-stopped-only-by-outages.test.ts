import { orders, reconcileUnknownOrders } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry } from '@mcb/core/metrics';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import { type FakePlatform, MERCHANT_NO, platformOrder, startFakePlatform, uid, useTestEnv } from '@mcb/testkit';
import { asc, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createReconcileMetrics, runSweep, type SweepDeps } from '@mcb/settlement';
import { orderState } from '@mcb/testkit/worker';
import { merchantKeys } from '@mcb/core/queue';

// Issue 48: abandoned checkouts at the front of the sweep's window (the platform answering "not found" as a 404, or
// code 0 with no data) stopped every sweep after three of them, so a paid order behind them was never asked about.
// Only an outage may stop a sweep; an unusable answer is the order's "unknown", put on a back-off of its own.

const env = useTestEnv();
let fake: FakePlatform;
let platform: PlatformClient;
let redis: Redis;
const logger = createLogger({ name: 'reconcile-outages-test', level: 'silent' });
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Get order calls as the sweep made them. */
const asked: string[] = [];
function deps(overrides: Partial<SweepDeps> = {}): SweepDeps {
  return {
    db: env.db.db,
    platform: {
      getOrder: (no, opts) => {
        asked.push(no);
        return platform.getOrder(no, opts);
      },
      getPaymentMethods: (opts) => platform.getPaymentMethods(opts),
      close: () => platform.close(),
    },
    logger,
    redis,
    lockKey: merchantKeys(env.prefix).sweepLock,
    merchantNo: MERCHANT_NO,
    // One request at a time: the orders are asked oldest first, so the six unusable answers come in a row.
    settings: { minAgeMs: 10 * MINUTE, maxAgeMs: 7 * 24 * HOUR, ratePerSecond: 1000, batchSize: 100, concurrency: 1 },
    ...overrides,
  };
}

/** A pay-in of ours created `ageMs` ago. */
async function payin(prefix: string, ageMs: number, amount = '100.00'): Promise<string> {
  const no = `${prefix}-${uid()}`;
  await env.db.db.insert(orders).values({
    merchantOrderNo: no,
    kind: 'payin',
    amount,
    currency: 'PHP',
    requestHash: `test-${no}`,
    createdAt: sql`now() - make_interval(secs => ${ageMs / 1000})`,
  });
  return no;
}

async function backoffOf(no: string) {
  const [row] = await env.db.db
    .select({ unknownCount: reconcileUnknownOrders.unknownCount, lastCode: reconcileUnknownOrders.lastCode })
    .from(reconcileUnknownOrders)
    .innerJoin(orders, eq(orders.id, reconcileUnknownOrders.orderId))
    .where(eq(orders.merchantOrderNo, no));
  return row;
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
  asked.length = 0;
  await env.db.pool.query(
    'begin; set local session_replication_role = replica; truncate orders, callback_receipts, ledger_entries, order_events, reviews, reconcile_unknown_orders restart identity cascade; commit',
  );
});

describe('the reconciliation sweep, behind orders nobody paid', () => {
  it('credits a lost pay-in behind three 404s and three code-0 answers without data, and counts them unknown', async () => {
    // 1. Six abandoned checkouts, older than the paid order, so they come first in its window.
    const notFound = [await payin('NF', 7 * HOUR), await payin('NF', 6 * HOUR), await payin('NF', 5 * HOUR)];
    const noData = [await payin('ND', 4 * HOUR), await payin('ND', 3 * HOUR), await payin('ND', 2 * HOUR)];
    for (const no of notFound) fake.failNext(no, 1, 404);
    for (const no of noData) fake.refuse(no, 0, 'success'); // {"code":0,"message":"success","data":null}
    // 2. The paid one, whose callbacks were lost.
    const paid = await payin('PAID', HOUR, '250.00');
    fake.setOrder(
      platformOrder({ orderNo: `P${paid}`, merchantOrderNo: paid, type: 'payin', state: 6, amountJson: '250' }),
    );
    const reconcileMetrics = createReconcileMetrics(createMetricsRegistry('reconcile-outages-test'));

    const report = await runSweep(deps({ reconcileMetrics }));

    expect(asked).toEqual([...notFound, ...noData, paid]);
    expect(report).toMatchObject({ scanned: 7, unknown: 6, errors: 0, stoppedEarly: false, stopReason: null });
    expect(report.recovered.credited).toBe(1);
    expect(report.orders.unknown).toEqual([...notFound, ...noData]);
    const s = await orderState(env.db.db, paid);
    expect(s.order.status).toBe('credited');
    expect(s.ledger).toMatchObject([{ entryType: 'payin_credit', amount: '250.00' }]);
    // CallbacksLost sees the recovery; the unknown answers are counted by code, none as an error.
    const recovered = (await reconcileMetrics.recovered.get()).values;
    expect(recovered.find((v) => v.labels.kind === 'payin' && v.labels.outcome === 'credited')?.value).toBe(1);
    const unknown = (await reconcileMetrics.unknown.get()).values.map((v) => [v.labels.code, v.value]);
    expect(unknown.sort()).toEqual([
      ['PLATFORM_BAD_RESPONSE', 3],
      ['PLATFORM_HTTP_ERROR', 3],
    ]);
    expect((await reconcileMetrics.errors.get()).values).toEqual([]);
    expect(await backoffOf(notFound[0]!)).toEqual({ unknownCount: 1, lastCode: 'PLATFORM_HTTP_ERROR' });
    expect(await backoffOf(noData[0]!)).toEqual({ unknownCount: 1, lastCode: 'PLATFORM_BAD_RESPONSE' });
    expect(await backoffOf(paid)).toBeUndefined();
  });

  it('does not ask an order answered "unknown" again on the next sweep, but after its back-off, which doubles', async () => {
    const unknown = await payin('NF', 3 * HOUR);
    const later = await payin('LATER', 2 * HOUR);
    fake.failNext(unknown, 2, 404);
    fake.failNext(later, 1, 404);
    const backoff = { firstMs: 15 * MINUTE, maxMs: 6 * HOUR };
    const at = (ms: number) => () => Date.now() + ms;

    // 1. Both answered 404: unknown, on their back-off.
    expect(await runSweep(deps({ settings: { ...deps().settings, unknownBackoff: backoff } }))).toMatchObject({
      scanned: 2,
      unknown: 2,
    });
    // 2. The next sweep asks neither.
    asked.length = 0;
    const next = await runSweep(deps({ now: at(5 * MINUTE) }));
    expect(asked).toEqual([]);
    expect(next).toMatchObject({ scanned: 0, unknown: 0, errors: 0 });
    // 3. Past the first 15 minutes both are asked again: `unknown` answers 404 again (its wait doubles to 30 minutes),
    //    `later` is now answered "not final" (the platform has it): its back-off ends.
    fake.setOrder(
      platformOrder({ orderNo: `P${later}`, merchantOrderNo: later, type: 'payin', state: 1, amountJson: '100' }),
    );
    asked.length = 0;
    expect(await runSweep(deps({ now: at(16 * MINUTE) }))).toMatchObject({ scanned: 2, unknown: 1, stillPending: 1 });
    expect(asked.sort()).toEqual([unknown, later].sort());
    expect(await backoffOf(unknown)).toEqual({ unknownCount: 2, lastCode: 'PLATFORM_HTTP_ERROR' });
    expect(await backoffOf(later)).toBeUndefined();
    // 4. 20 minutes later `unknown` still waits (30 minutes now); `later` is asked as any pending order.
    asked.length = 0;
    await runSweep(deps({ now: at(36 * MINUTE) }));
    expect(asked).toEqual([later]);
    const rows = await env.db.db.select().from(reconcileUnknownOrders).orderBy(asc(reconcileUnknownOrders.orderId));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.nextAskAt.getTime() - rows[0]!.lastAskedAt.getTime()).toBe(30 * MINUTE);
  });

  it('still stops on an outage: three 429s in a row', async () => {
    const nos = [await payin('TM', 4 * HOUR), await payin('TM', 3 * HOUR), await payin('TM', 2 * HOUR)];
    const behind = await payin('BEHIND', HOUR);
    for (const no of nos) fake.failNext(no, 1, 429);
    const report = await runSweep(deps());
    expect(report).toMatchObject({ scanned: 3, errors: 3, unknown: 0, stoppedEarly: true });
    expect(report.stopReason).toMatch(/3 failures in a row, the last PLATFORM_HTTP_ERROR/);
    expect(asked).not.toContain(behind);
    // An outage puts no order on a back-off: the next sweep asks them all.
    expect(await env.db.db.select().from(reconcileUnknownOrders)).toEqual([]);
  });
});
