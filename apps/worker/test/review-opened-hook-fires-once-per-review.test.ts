import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { callbackJobSchema } from '@mcb/core/queue';
import {
  createOrder,
  type FakePlatform,
  MERCHANT_NO,
  payinEvent,
  platformOrder,
  startFakePlatform,
  uid,
  useTestEnv,
} from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyEvent, recordReview, type OpenedReview } from '@mcb/settlement';

// The review-opened alert must fire once per review whichever path opened it (callback job, sweep, re-verify), and
// never again for repeat occurrences, even when two workers record the same event at once.
const env = useTestEnv();
const logger = createLogger({ name: 'review-hook-test', level: 'silent' });
let fake: FakePlatform;
let platform: PlatformClient;

beforeAll(async () => {
  fake = await startFakePlatform();
  platform = createPlatformClient({ baseUrl: fake.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
});
afterAll(async () => {
  await platform?.close();
  await fake?.close();
});

describe('review-opened hook', () => {
  it('recordReview says which of two concurrent occurrences opened the review', async () => {
    const no = `PI-${uid()}`;
    const event = callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '1' }));
    const failure = { code: 'VERIFY_AMOUNT_MISMATCH' as const, reason: 'test', details: {} };
    const results = await Promise.all([1, 2, 3].map(() => recordReview(env.db.db, event, failure)));
    expect(results.filter((r) => r.opened)).toHaveLength(1);
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
  });

  it('applyEvent calls onReviewOpened once for a new review and not for its repeats', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100' });
    fake.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100' }),
    );
    const opened: OpenedReview[] = [];
    const deps = { db: env.db.db, platform, logger, onReviewOpened: (r: OpenedReview) => void opened.push(r) };
    const forged = callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '1000' }));

    const first = await applyEvent(forged, deps, { noWait: true });
    const second = await applyEvent(forged, deps, { noWait: true });
    expect(first).toMatchObject({ status: 'review', opened: true });
    expect(second).toMatchObject({
      status: 'review',
      opened: false,
      reviewId: (first as { reviewId: number }).reviewId,
    });
    expect(opened).toEqual([
      expect.objectContaining({ orderNo: `P${no}`, merchantOrderNo: no, state: 6, code: 'VERIFY_AMOUNT_MISMATCH' }),
    ]);
  });

  it('a hook that throws does not fail the event: the review is stored', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100' });
    fake.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100' }),
    );
    const forged = callbackJobSchema.parse(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '7' }));
    const outcome = await applyEvent(
      forged,
      {
        db: env.db.db,
        platform,
        logger,
        onReviewOpened: () => {
          throw new Error('webhook exploded');
        },
      },
      { noWait: true },
    );
    expect(outcome).toMatchObject({ status: 'review', opened: true });
  });
});
