import type { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { merchantQueues } from '../src/callbacks/merchant-queues.ts';

// The console's merchants' queues resolve a request's `merchant` by the same rule as its merchants (pickByRef):
// the named ref, or the only merchant; otherwise 400 naming the field and the refs, and nothing is picked.
const opened: string[] = [];
const open = (name: string, prefix: string) => {
  opened.push(`${prefix}:${name}`);
  return { name } as unknown as Queue;
};
const two = merchantQueues(
  [
    { ref: 'default', merchantNo: 'M1' },
    { ref: 'b', merchantNo: 'M2' },
  ],
  '{mcb}',
  open,
);

describe('merchantQueues', () => {
  it("opens each merchant's own queue under its own prefix", () => {
    expect(opened).toEqual(['{mcb}:callbacks', '{mcb-b}:callbacks-b']);
    expect(two.of('b').unknownOrderWaiting).toBe('{mcb-b}:callbacks-b:unknown-order-waiting');
    expect(two.byMerchantNo('M1')?.ref).toBe('default');
    expect(two.byMerchantNo('M9')).toBeUndefined();
  });

  it('with several merchants, a missing ref is 400 naming the field and the refs', () => {
    expect(() => two.of(undefined, 'filter.merchant')).toThrowError(
      expect.objectContaining({
        code: 'REQUEST_INVALID',
        message: expect.stringMatching(/^filter\.merchant: required: .*\(default, b\)/),
        details: { field: 'filter.merchant', merchants: ['default', 'b'] },
      }),
    );
  });

  it('an unknown ref is 400, quoting at most 40 characters of it', () => {
    const long = 'x'.repeat(500);
    expect(() => two.of(long)).toThrowError(
      expect.objectContaining({
        code: 'REQUEST_INVALID',
        message: `merchant: unknown merchant "${'x'.repeat(40)}"; expected one of default, b`,
      }),
    );
  });

  it('with one merchant, no ref picks it', () => {
    const one = merchantQueues([{ ref: 'default', merchantNo: 'M1' }], 'mcb', open);
    expect(one.of(undefined).ref).toBe('default');
    expect(one.several).toBe(false);
  });
});
