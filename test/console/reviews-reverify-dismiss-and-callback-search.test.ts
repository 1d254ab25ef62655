import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reviews } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { ledgerOf, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
const AUTH = { authorization: `Bearer ${TOKEN}` };

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true });
});
afterAll(async () => {
  await stack?.close();
});

type ReviewView = {
  id: number;
  status: string;
  reasonCode: string;
  occurrences: number;
  note: string | null;
  events: { hash: string; fiatAmount: string | null; seen: number; reasonCode: string }[];
  attempts: { source: string; outcome: string; reasonCode: string | null }[];
};

/** A pay-in whose Get order reports another amount: the worker sends it to review. */
async function reviewedPayin() {
  const no = uid();
  const merchantOrderNo = `MO-${no}`;
  const orderNo = `P-${no}`;
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '100.00' });
  stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '99.00' }));
  const jobId = await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '100.00' }));
  const [review] = await waitFor(async () => {
    const rows = await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo));
    return rows.length ? rows : undefined;
  });
  return { merchantOrderNo, orderNo, jobId, reviewId: review!.id };
}

// Every action carries a reason (the audit trail's "why"); a test that checks its absence sends `reason: undefined`.
const api = (method: 'GET' | 'POST', url: string, payload?: object) =>
  stack.app.inject({
    method,
    url,
    payload: method === 'POST' ? { reason: 'test: operator checked the platform', ...payload } : payload,
    headers: AUTH,
  });

describe('reviews', () => {
  it('lists open reviews with their reasons', async () => {
    const { reviewId } = await reviewedPayin();
    const res = await api('GET', '/api/reviews?status=open');
    expect(res.statusCode).toBe(200);
    const found = (res.json() as { reviews: ReviewView[] }).reviews.find((r) => r.id === reviewId);
    expect(found).toMatchObject({ status: 'open', reasonCode: 'VERIFY_AMOUNT_MISMATCH', occurrences: 1 });
    expect((await api('GET', '/api/reviews?status=bogus')).statusCode).toBe(400);
  });

  it('re-verify while Get order still disagrees keeps the review open, credits nothing, and adds an attempt (not an occurrence)', async () => {
    const { merchantOrderNo, reviewId } = await reviewedPayin();
    const res = await api('POST', `/api/reviews/${reviewId}/reverify`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      outcome: 'review',
      review: {
        id: reviewId,
        status: 'open',
        reasonCode: 'VERIFY_AMOUNT_MISMATCH',
        occurrences: 1,
        attempts: [{ source: 'review', outcome: 'unconfirmed', reasonCode: 'VERIFY_AMOUNT_MISMATCH' }],
      },
    });
    expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toHaveLength(0);
  });

  it('shows each distinct event of a review (a forged copy and another) with its amounts and how often it came', async () => {
    const { merchantOrderNo, orderNo, reviewId } = await reviewedPayin();
    // A second, different event of the same pair (another claimed amount) under its own job id.
    const other = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '5000.00' });
    await stack.queue.add('payin', other, { jobId: `other-${orderNo}` });
    const found = await waitFor(async () => {
      const list = (
        (await api('GET', `/api/reviews?merchantOrderNo=${merchantOrderNo}`)).json() as { reviews: ReviewView[] }
      ).reviews;
      return list[0]?.events.length === 2 ? list[0] : undefined;
    });
    expect(found).toMatchObject({ id: reviewId, occurrences: 2, reasonCode: 'VERIFY_AMOUNT_MISMATCH' });
    expect(found.events.map((e) => [e.fiatAmount, e.seen, e.reasonCode])).toEqual([
      ['100.00', 1, 'VERIFY_AMOUNT_MISMATCH'],
      ['5000.00', 1, 'VERIFY_AMOUNT_MISMATCH'],
    ]);
    expect(new Set(found.events.map((e) => e.hash)).size).toBe(2);
  });

  it('re-verify after Get order confirms credits once and resolves the review in the same transaction; a second re-verify is 409', async () => {
    const { merchantOrderNo, orderNo, reviewId } = await reviewedPayin();
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '100.00' }));
    const results = await Promise.all([1, 2].map(() => api('POST', `/api/reviews/${reviewId}/reverify`)));
    expect(results.map((r) => r.statusCode).sort()).toContain(200);
    for (const r of results) expect([200, 409]).toContain(r.statusCode);
    const [row] = await env.db.db.select().from(reviews).where(eq(reviews.id, reviewId));
    expect(row).toMatchObject({ status: 'resolved' });
    const { order, ledger } = await ledgerOf(env.db.db, merchantOrderNo);
    expect(order.status).toBe('credited');
    expect(ledger).toHaveLength(1);
    const again = await api('POST', `/api/reviews/${reviewId}/reverify`);
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'REVIEW_NOT_OPEN' });
  });

  it('re-verify with the platform down answers 503 and changes nothing', async () => {
    const { merchantOrderNo, reviewId } = await reviewedPayin();
    stack.platform.failNext(merchantOrderNo, 5, 503);
    const res = await api('POST', `/api/reviews/${reviewId}/reverify`);
    expect(res.statusCode).toBeGreaterThanOrEqual(502);
    const [row] = await env.db.db.select().from(reviews).where(eq(reviews.id, reviewId));
    expect(row).toMatchObject({ status: 'open', occurrences: 1 });
    stack.platform.failNext(merchantOrderNo, 0, 503);
  });

  it('dismisses an open review with a note; a note is required; unknown ids are 404', async () => {
    const { reviewId } = await reviewedPayin();
    expect((await api('POST', `/api/reviews/${reviewId}/dismiss`, { reason: undefined })).statusCode).toBe(400);
    expect((await api('POST', `/api/reviews/${reviewId}/dismiss`, { reason: '   ' })).statusCode).toBe(400);
    const res = await api('POST', `/api/reviews/${reviewId}/dismiss`, {
      note: 'forged: platform never had this order',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      review: { status: 'dismissed', note: 'forged: platform never had this order', closedBy: 'admin' },
    });
    // Who dismissed it is on the review itself (API and page), for those who cannot read the audit.
    expect((await api('GET', `/api/reviews?status=dismissed`)).json()).toMatchObject({
      reviews: expect.arrayContaining([expect.objectContaining({ id: reviewId, closedBy: 'admin' })]),
    });
    const page = await stack.app.inject({
      method: 'GET',
      url: '/reviews?status=dismissed',
      headers: { ...AUTH, accept: 'text/html' },
    });
    expect(page.body).toMatch(
      new RegExp(`id="review-${reviewId}"[\\s\\S]*<dt>Dismissed by</dt><dd data-closed-by>admin</dd>`),
    );
    expect((await api('POST', `/api/reviews/${reviewId}/dismiss`, { note: 'again' })).statusCode).toBe(409);
    expect((await api('POST', `/api/reviews/${reviewId}/reverify`)).statusCode).toBe(409);
    expect((await api('POST', '/api/reviews/999999/dismiss', { note: 'x' })).statusCode).toBe(404);
  });
});

describe('callback search', () => {
  it('shows receipts, reviews and queue jobs of an order by either number; at least one number is required', async () => {
    const { merchantOrderNo, orderNo, jobId, reviewId } = await reviewedPayin();
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '100.00' }));
    expect((await api('POST', `/api/reviews/${reviewId}/reverify`)).statusCode).toBe(200);

    const byOrderNo = await api('GET', `/api/callbacks?orderNo=${orderNo}`);
    expect(byOrderNo.statusCode).toBe(200);
    const body = byOrderNo.json() as {
      receipts: Record<string, unknown>[];
      reviews: Record<string, unknown>[];
      jobs: Record<string, unknown>[];
    };
    expect(body.receipts).toEqual([
      expect.objectContaining({ orderNo, state: 6, source: 'review', outcome: 'credited', confirmedAmount: '100' }),
    ]);
    expect(body.reviews).toEqual([
      expect.objectContaining({ id: reviewId, status: 'resolved', reasonCode: 'VERIFY_AMOUNT_MISMATCH' }),
    ]);
    // A job that ends in review releases its id (so a genuine callback of the same pair gets a job of its own):
    // what arrived lives on in the review, not in the queue.
    expect(body.jobs).toEqual([]);
    expect(await stack.queue.getJob(jobId)).toBeUndefined();

    const byMerchant = (await api('GET', `/api/callbacks?merchantOrderNo=${merchantOrderNo}`)).json() as typeof body;
    expect(byMerchant.receipts).toHaveLength(1);
    expect(byMerchant.jobs).toEqual([]);
    expect((await api('GET', '/api/callbacks')).statusCode).toBe(400);
    expect((await api('GET', '/api/callbacks?orderNo=a%20b')).statusCode).toBe(400);
  });
});
