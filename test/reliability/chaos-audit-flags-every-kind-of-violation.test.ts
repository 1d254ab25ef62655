import { useTestEnv } from '@mcb/testkit';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { audit, type ExpectedOrder } from './chaos/audit.ts';

// The chaos run is only as good as its end check: on a database and queue seeded with known faults, the audit
// names each one (a missing finalisation, a credit at the wrong amount, an applied stale event, an extra ledger
// entry, a failed job, an acknowledged job that is gone).
describe('chaos audit', () => {
  const env = useTestEnv();

  it('flags a missing finalisation, a wrong-amount credit, an applied stale event, a failed job and a lost job', async () => {
    const q = (sql: string, params: unknown[] = []) => env.db.pool.query(sql, params);
    const order = async (no: string, kind: string, amount: string, status: string) =>
      (
        await q(
          `insert into orders (merchant_no, merchant_order_no, kind, currency, amount, status, request_hash) values ('M1', $1, $2, 'INR', $3, $4, 'x') returning id`,
          [no, kind, amount, status],
        )
      ).rows[0].id as number;
    const receipt = async (
      orderId: number,
      orderNo: string,
      state: number,
      kind: string,
      no: string,
      outcome: string,
    ) =>
      (
        await q(
          `insert into callback_receipts (order_no, state, kind, merchant_no, merchant_order_no, order_id, confirmed_amount, source, outcome)
         values ($1, $2, $3, 'M1', $4, $5, '1', 'callback', $6) returning id`,
          [orderNo, state, kind, no, orderId, outcome],
        )
      ).rows[0].id as number;
    const entry = (orderId: number, type: string, amount: string, receiptId: number) =>
      q(
        `insert into ledger_entries (merchant_no, order_id, entry_type, amount, currency, receipt_id) values ('M1', $1, $2, $3, 'INR', $4)`,
        [orderId, type, amount, receiptId],
      );

    // A: correct. B: payout never finalised. C: credited at 10x. D: succeeded payout that also got a refund entry
    // from its applied stale (state 5) event.
    const a = await order('A', 'payin', '10.00', 'credited');
    await entry(a, 'payin_credit', '10.00', await receipt(a, 'PA', 6, 'payin', 'A', 'credited'));
    await order('B', 'payout', '5.00', 'pending');
    const c = await order('C', 'payin', '7.00', 'credited');
    await entry(c, 'payin_credit', '70.00', await receipt(c, 'PC', 6, 'payin', 'C', 'credited'));
    const d = await order('D', 'payout', '3.00', 'succeeded');
    await receipt(d, 'PD', 4, 'payout', 'D', 'succeeded');
    await entry(d, 'payout_refund', '3.00', await receipt(d, 'PD', 5, 'payout', 'D', 'refused'));

    const redis = new Redis(env.redisUrl);
    try {
      await redis.zadd(`${env.prefix}:callbacks:failed`, 1, 'payin-PB-4');
      await redis.hset(
        `${env.prefix}:callbacks:payin-PA-6`,
        'atm',
        '1',
        'finishedOn',
        '1',
        'returnvalue',
        '{"status":"applied","outcome":"credited"}',
      );
    } finally {
      redis.disconnect();
    }
    const expected: ExpectedOrder[] = [
      { orderNo: 'PA', merchantOrderNo: 'A', kind: 'payin', amount: '10.00', state: 6 },
      { orderNo: 'PB', merchantOrderNo: 'B', kind: 'payout', amount: '5.00', state: 4 },
      { orderNo: 'PC', merchantOrderNo: 'C', kind: 'payin', amount: '7.00', state: 6 },
      { orderNo: 'PD', merchantOrderNo: 'D', kind: 'payout', amount: '3.00', state: 4 },
    ];
    const result = await audit({
      databaseUrl: env.databaseUrl,
      redisUrl: env.redisUrl,
      prefix: env.prefix,
      orders: expected,
      refused: [{ orderNo: 'PD', state: 5, merchantOrderNo: 'D', why: 'stale' }],
      jobIds: ['payin-PA-6', 'payin-PC-6'],
    });
    const v = result.violations.join('\n');
    expect(v).toContain('B (PB, state 4): status pending, expected succeeded');
    expect(v).toContain('PB/4: 0 receipts');
    expect(v).toMatch(/C: ledger payin_credit \(1, 0 at the order's amount\)/);
    expect(v).toMatch(/D: 1 ledger entries, expected none/);
    expect(v).toContain('stale event PD/5 was applied');
    expect(v).toMatch(/ledger has 3 entries, expected 2/);
    expect(v).toContain('1 failed jobs');
    expect(v).toContain('acknowledged job payin-PC-6 is missing');
    expect(result.violations).toHaveLength(8); // the eight above, nothing else
    // The counters the sentinel fault run reports: B never applied, PC's acknowledged job lost, nothing applied twice.
    expect({
      notApplied: result.notApplied,
      missingAcknowledged: result.missingAcknowledged,
      doubleApplied: result.doubleApplied,
    }).toEqual({
      notApplied: 1,
      missingAcknowledged: 1,
      doubleApplied: 0,
    });
  });
});
