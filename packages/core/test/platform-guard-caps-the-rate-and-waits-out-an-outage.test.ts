import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { createPlatformClient, guardPlatform, type BreakerState } from '@mcb/core/platform';
import { MERCHANT_NO, platformOrder, startFakePlatform, type FakePlatform } from '@mcb/testkit';

// Flow control in front of Get order, against a real HTTP platform double: requests counted where they arrive.

let platform: FakePlatform;
beforeAll(async () => {
  platform = await startFakePlatform();
  for (const no of ['R', 'OUT', 'LONG', 'PAGE'])
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '10' }),
    );
});
afterAll(async () => {
  await platform?.close();
});

const client = () => createPlatformClient({ baseUrl: platform.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 });

/** The most arrivals in any one-second window. */
function busiestSecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[j]! - sorted[i]! >= 1000) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

describe('the platform guard', () => {
  it('never lets more than PLATFORM_MAX_RPS Get orders reach the platform in a second, however many ask at once', async () => {
    const guarded = guardPlatform(client(), { maxRps: 80 });
    const from = platform.arrivals.length;
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 200 }, () => guarded.getOrder('R')));
    const seconds = (performance.now() - started) / 1000;
    await guarded.close();
    expect(answers.every((o) => o.orderNo === 'PR')).toBe(true);
    const arrivals = platform.arrivals.slice(from);
    expect(arrivals).toHaveLength(200);
    expect(busiestSecond(arrivals)).toBeLessThanOrEqual(80);
    // 80 in any 1.1 s: the last 40 of the 200 start after 2.2 s.
    expect(seconds).toBeGreaterThanOrEqual(2.2);
  });

  it('opens after repeated failures: callers wait instead of failing, one probe at a time, and all succeed once the platform is back', async () => {
    const states: BreakerState[] = [];
    const guarded = guardPlatform(client(), {
      failuresToOpen: 5,
      openMs: { initial: 200, max: 400 },
      maxWaitMs: 15_000,
      onStateChange: (s) => states.push(s),
    });
    // 1. Four failures in a row (HTTP 503) fail their callers: the circuit is still closed.
    platform.failNext('OUT', 5 + 3, 503);
    for (let i = 0; i < 4; i++)
      await expect(guarded.getOrder('OUT')).rejects.toMatchObject({ code: ErrorCodes.PLATFORM_HTTP_ERROR });
    expect(guarded.breakerState()).toBe('closed');
    const before = platform.hits.get('OUT')!;
    // 2. Thirty callers at once: the first one's failure (the fifth) opens the circuit; from then on only probes
    //    reach the platform (3 fail, then one succeeds and closes it), and no caller fails, the first included.
    const answers = await Promise.all(Array.from({ length: 30 }, () => guarded.getOrder('OUT')));
    expect(answers.every((o) => o.orderNo === 'POUT')).toBe(true);
    expect(guarded.breakerState()).toBe('closed');
    // The fifth failure, 3 failed probes, then the 30 answers (the first of them the probe that closed it).
    expect(platform.hits.get('OUT')! - before).toBe(1 + 3 + 30);
    expect(states).toEqual(expect.arrayContaining(['open', 'half-open', 'closed']));
    await guarded.close();
  });

  it('a caller that waits longer than maxWaitMs for an open circuit fails with PLATFORM_CIRCUIT_OPEN, transient', async () => {
    const guarded = guardPlatform(client(), {
      failuresToOpen: 2,
      openMs: { initial: 5000, max: 5000 },
      maxWaitMs: 300,
    });
    platform.failNext('LONG', 2, 500);
    await expect(guarded.getOrder('LONG')).rejects.toMatchObject({ code: ErrorCodes.PLATFORM_HTTP_ERROR });
    // The second failure opens the circuit for 5 s: this caller waits 300 ms for it, then gives up.
    const err = await guarded.getOrder('LONG').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: ErrorCodes.PLATFORM_CIRCUIT_OPEN, transient: true });
    expect(platform.hits.get('LONG')).toBe(2);
    await guarded.close();
  });

  it('a business answer (order not found, a 4xx) does not count towards opening the circuit', async () => {
    const guarded = guardPlatform(client(), { failuresToOpen: 2 });
    for (let i = 0; i < 4; i++) await expect(guarded.getOrder('NOSUCH')).rejects.toBeInstanceOf(AppError);
    expect(guarded.breakerState()).toBe('closed');
    await guarded.close();
  });

  it('counts a reply that is not the envelope (HTTP 200, an HTML maintenance page) as an outage: it opens the circuit', async () => {
    const samples: boolean[] = [];
    const guarded = guardPlatform(client(), {
      failuresToOpen: 2,
      openMs: { initial: 5000, max: 5000 },
      maxWaitMs: 200,
      onSample: (s) => samples.push(s.ok),
    });
    platform.maintenancePageNext('PAGE', 2);
    await expect(guarded.getOrder('PAGE')).rejects.toMatchObject({
      code: ErrorCodes.PLATFORM_BAD_RESPONSE,
      transient: true,
    });
    await expect(guarded.getOrder('PAGE')).rejects.toMatchObject({
      code: ErrorCodes.PLATFORM_CIRCUIT_OPEN,
      transient: true,
    });
    expect(guarded.breakerState()).toBe('open');
    expect(samples).toEqual([false, false]);
    await guarded.close();
  });
});
