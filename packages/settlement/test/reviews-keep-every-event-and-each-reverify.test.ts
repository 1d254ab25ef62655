import { reviewAttempts, reviewOccurrences, reviews } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { callbackJobSchema, type CallbackJobInput } from '@mcb/core/queue';
import { applyEvent, reverifyReview, type ApplyDeps } from '@mcb/settlement';
import {
  createOrder,
  MERCHANT_NO,
  payinEvent,
  payoutEvent,
  platformOrder,
  startFakePlatform,
  uid,
  useTestEnv,
  type FakePlatform,
} from '@mcb/testkit';
import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const env = useTestEnv();
let platform: FakePlatform;
let client: PlatformClient;
let deps: ApplyDeps;

beforeAll(async () => {
  platform = await startFakePlatform();
  client = createPlatformClient({ baseUrl: platform.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
  deps = { db: env.db.db, platform: client, logger: createLogger({ name: 'reviews-test', level: 'silent' }) };
});
afterAll(async () => {
  await client?.close();
  await platform?.close();
});

const apply = (event: CallbackJobInput) => applyEvent(callbackJobSchema.parse(event), deps, { noWait: true });

async function reviewOf(merchantOrderNo: string) {
  const [review] = await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo));
  if (!review) throw new Error(`no review for ${merchantOrderNo}`);
  const events = await env.db.db
    .select()
    .from(reviewOccurrences)
    .where(eq(reviewOccurrences.reviewId, review.id))
    .orderBy(asc(reviewOccurrences.id));
  const attempts = await env.db.db
    .select()
    .from(reviewAttempts)
    .where(eq(reviewAttempts.reviewId, review.id))
    .orderBy(asc(reviewAttempts.id));
  return { review, events, attempts };
}

async function ledgerCount(merchantOrderNo: string): Promise<number> {
  const { rows } = await env.db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM ledger_entries l JOIN orders o ON o.id = l.order_id WHERE o.merchant_order_no = $1',
    [merchantOrderNo],
  );
  return rows[0]!.n;
}

/** A pay-in of 100.00 that Get order confirms released (state 6) for 100.00. */
async function confirmedPayin() {
  const no = `PI-${uid()}`;
  await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100.00' });
  platform.setOrder(
    platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100.00' }),
  );
  const event = (fiatAmount: string) => payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount });
  return { no, event };
}

describe('when the genuine pair commits', () => {
  it('leaves a forged event of the same pair open, with its finding, and says so in its history', async () => {
    const { no, event } = await confirmedPayin();
    expect(await apply(event('9999.01'))).toMatchObject({ status: 'review', code: 'VERIFY_AMOUNT_MISMATCH' });
    expect(await apply(event('100.00'))).toMatchObject({ status: 'applied', outcome: 'credited' });
    const { review, attempts } = await reviewOf(no);
    expect(review).toMatchObject({ status: 'open', reasonCode: 'VERIFY_AMOUNT_MISMATCH', closedAt: null, note: null });
    expect(attempts).toEqual([
      expect.objectContaining({
        source: 'callback',
        outcome: 'kept-open',
        reason: expect.stringMatching(/never applied/),
      }),
    ]);
    expect(await ledgerCount(no)).toBe(1);
  });

  it('resolves a review whose event it confirms (reviewed as not final, now applied)', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '40' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 1, amountJson: '40' }),
    );
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '40' });
    expect(await apply(event)).toMatchObject({ status: 'review', code: 'VERIFY_NOT_FINAL' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '40' }),
    );
    expect(await apply({ ...event, receivedAt: new Date().toISOString() })).toMatchObject({ status: 'applied' });
    const { review, attempts } = await reviewOf(no);
    expect(review).toMatchObject({
      status: 'resolved',
      reasonCode: 'VERIFY_NOT_FINAL',
      note: 'applied after re-verification',
    });
    expect(attempts).toEqual([expect.objectContaining({ outcome: 'applied', source: 'callback' })]);
  });
});

describe('an open review of a pair', () => {
  it('keeps every distinct event with its own finding, counts identical copies on one, and keeps the first finding', async () => {
    const { no, event } = await confirmedPayin();
    const first = event('1.00');
    await apply(first);
    await apply({ ...first, receivedAt: new Date(Date.now() + 1000).toISOString() }); // the same event, later
    await apply(event('2.00'));
    const { review, events } = await reviewOf(no);
    expect(review).toMatchObject({
      occurrences: 3,
      reasonCode: 'VERIFY_AMOUNT_MISMATCH',
      reason: expect.stringMatching(/the callback 1\.00$/),
    });
    expect(review.event).toMatchObject({ fiatAmount: '1.00' });
    expect(events.map((e) => [e.event.fiatAmount, e.seen])).toEqual([
      ['1.00', 2],
      ['2.00', 1],
    ]);
    expect(events[0]!.eventHash).not.toBe(events[1]!.eventHash);
    expect(events[1]!.reason).toMatch(/the callback 2\.00$/);
  });
});

describe('re-verifying a review', () => {
  it('adds an attempt and keeps the original finding when Get order now refuses (a forged refund claim)', async () => {
    const no = `PO-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payout', amount: '30' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payout', state: 4, amountJson: '30' }),
    );
    // 1. A forged refusal (state 5) of a payout Get order reports succeeded (4).
    expect(await apply(payoutEvent({ orderNo: `P${no}`, merchantOrderNo: no, state: 5 }))).toMatchObject({
      code: 'VERIFY_STATE_MISMATCH',
    });
    const { review } = await reviewOf(no);
    // 2. Get order now refuses to answer (40404): the re-verify is an attempt, the finding stays.
    platform.refuse(no, 40404, 'order not found');
    expect(await reverifyReview(deps, review.id)).toMatchObject({ status: 'review', code: 'PLATFORM_ERROR_CODE' });
    const after = await reviewOf(no);
    expect(after.review).toMatchObject({ status: 'open', reasonCode: 'VERIFY_STATE_MISMATCH', occurrences: 1 });
    expect(after.attempts).toEqual([
      expect.objectContaining({ source: 'review', outcome: 'unconfirmed', reasonCode: 'PLATFORM_ERROR_CODE' }),
    ]);
  });

  it('never closes a forged review as applied once the genuine pair is applied: it stays open with the attempt', async () => {
    const { no, event } = await confirmedPayin();
    await apply(event('9999.01'));
    await apply(event('100.00'));
    const { review } = await reviewOf(no);
    expect(await reverifyReview(deps, review.id)).toMatchObject({ status: 'duplicate' });
    const after = await reviewOf(no);
    expect(after.review).toMatchObject({ status: 'open', reasonCode: 'VERIFY_AMOUNT_MISMATCH' });
    expect(after.attempts.map((a) => [a.source, a.outcome, a.reasonCode])).toEqual([
      ['callback', 'kept-open', 'VERIFY_AMOUNT_MISMATCH'],
      ['review', 'kept-open', 'VERIFY_AMOUNT_MISMATCH'],
    ]);
    expect(await ledgerCount(no)).toBe(1);
  });

  it('applies the genuine event of a review holding a forged one too, and still leaves the review open', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '100.00' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 1, amountJson: '100.00' }),
    );
    // 1. A forged amount, then the genuine event while Get order is not final yet: one review, two events.
    await apply(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '9999.01' }));
    await apply(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '100.00' }));
    const { review, events } = await reviewOf(no);
    expect(events).toHaveLength(2);
    // 2. Final now: the re-verify applies the event Get order confirms (the second), not the forged first.
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '100.00' }),
    );
    expect(await reverifyReview(deps, review.id)).toMatchObject({ status: 'applied', outcome: 'credited' });
    const after = await reviewOf(no);
    expect(after.review.status).toBe('open');
    expect(after.attempts).toEqual([expect.objectContaining({ source: 'review', outcome: 'kept-open' })]);
    expect(await ledgerCount(no)).toBe(1);
  });

  it('resolves as already applied a review whose every event Get order confirms', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '12' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 1, amountJson: '12' }),
    );
    const event = payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '12' });
    await apply(event);
    const { review } = await reviewOf(no);
    // The pair is applied by another path that does not touch this review (closing it is left to the re-verify).
    await env.db.pool.query(`UPDATE reviews SET status = 'dismissed' WHERE id = $1`, [review.id]);
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '12' }),
    );
    expect(await apply({ ...event, receivedAt: new Date().toISOString() })).toMatchObject({ status: 'applied' });
    await env.db.pool.query(`UPDATE reviews SET status = 'open' WHERE id = $1`, [review.id]);
    expect(await reverifyReview(deps, review.id)).toMatchObject({ status: 'duplicate' });
    const after = await reviewOf(no);
    expect(after.review).toMatchObject({ status: 'resolved', note: 'already applied', reasonCode: 'VERIFY_NOT_FINAL' });
    expect(after.attempts).toEqual([expect.objectContaining({ source: 'review', outcome: 'already-applied' })]);
  });
});
