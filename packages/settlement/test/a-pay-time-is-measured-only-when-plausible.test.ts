import { describe, expect, it } from 'vitest';
import { judgePayTime, PAY_TIME_SKEW_MS } from '../src/pay-time.ts';

// Issue 48: PayTime is not confirmed by Get order; a forged one far in the past would fire PaymentToCreditSlow.
// Plausible: from our order's creation less 5 minutes to the callback's arrival plus 5 minutes, bounds included.
const created = new Date('2026-11-28T10:00:00.000Z');
const receivedAt = '2026-11-28T10:30:00.000Z';
const at = (ms: number) => new Date(ms).toISOString();
const judge = (payTime: string | null) => judgePayTime(payTime, { orderCreatedAt: created, receivedAt });

describe('a PayTime is plausible', () => {
  it('between our order’s creation and the callback’s arrival, each with 5 minutes of clock skew', () => {
    expect(PAY_TIME_SKEW_MS).toBe(300_000);
    expect(judge('2026-11-28T10:10:00.000Z')).toEqual({
      paidAt: Date.parse('2026-11-28T10:10:00.000Z'),
      implausible: null,
    });
    expect(judge(at(created.getTime() - PAY_TIME_SKEW_MS)).implausible).toBeNull();
    expect(judge(at(Date.parse(receivedAt) + PAY_TIME_SKEW_MS)).implausible).toBeNull();
  });

  it('not before the order was created, nor after the callback arrived, beyond the skew', () => {
    expect(judge(at(created.getTime() - PAY_TIME_SKEW_MS - 1)).implausible).toBe(
      'PayTime is before our order was created',
    );
    expect(judge('2020-01-01T00:00:00.000Z').implausible).toBe('PayTime is before our order was created');
    expect(judge(at(Date.parse(receivedAt) + PAY_TIME_SKEW_MS + 1)).implausible).toBe(
      'PayTime is after the callback arrived',
    );
    expect(judge('2030-01-01T00:00:00.000Z').implausible).toBe('PayTime is after the callback arrived');
  });

  it('a missing or unparsable PayTime is never measured; a missing bound is not checked', () => {
    expect(judge(null).implausible).toBe('no PayTime');
    expect(judge('not a time').implausible).toBe('no PayTime');
    expect(judgePayTime('2020-01-01T00:00:00.000Z', { orderCreatedAt: undefined, receivedAt }).implausible).toBeNull();
  });
});
