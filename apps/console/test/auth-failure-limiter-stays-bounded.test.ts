import { describe, expect, it } from 'vitest';
import { createAuthFailureLimiter } from '../src/session/auth-failures.ts';

// The failed-authentication limiter keeps at most 10,000 addresses: a flood of distinct addresses cannot grow the
// console's memory without bound. Expired windows go first, then the oldest addresses.
describe('the failed-authentication limiter', () => {
  it('locks an address at its limit, frees it when the window ends, and evicts the oldest address beyond 10,000', () => {
    const limiter = createAuthFailureLimiter({ perAddress: 1, global: 1_000_000, windowMs: 60_000 });
    const t = 1_000_000;
    expect(limiter.fail('10.0.0.0', t)).toMatchObject({ lockedNow: true, retryAfterMs: 60_000, globalExceeded: false });
    expect(limiter.lockedFor('10.0.0.0', t + 1000)).toBe(59_000);
    expect(limiter.lockedFor('10.0.0.0', t + 60_000)).toBe(0);

    for (let i = 0; i < 10_000; i++) limiter.fail(`10.1.${i >> 8}.${i & 255}`, t + 1);
    expect(limiter.lockedFor('10.1.0.0', t + 2)).toBeGreaterThan(0);
    limiter.fail('10.2.0.0', t + 2);
    expect(limiter.lockedFor('10.1.0.0', t + 2)).toBe(0);
    expect(limiter.lockedFor('10.1.0.1', t + 2)).toBeGreaterThan(0);
    expect(limiter.lockedFor('10.2.0.0', t + 2)).toBeGreaterThan(0);
  });

  it('says when failures from all addresses together exceed the global limit', () => {
    const limiter = createAuthFailureLimiter({ perAddress: 100, global: 2, windowMs: 60_000 });
    expect([1, 2, 3].map((i) => limiter.fail(`10.3.0.${i}`, 5).globalExceeded)).toEqual([false, false, true]);
    expect(limiter.fail('10.3.0.9', 60_006).globalExceeded).toBe(false);
  });
});
