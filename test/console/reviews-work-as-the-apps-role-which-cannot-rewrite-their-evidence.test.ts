import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, reviewOccurrences, reviews, type Db } from '@mcb/core/db';
import { recordReviewAttempt } from '@mcb/settlement';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { ledgerOf, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

// Migration 0012 (issue 48): the apps' role (a member of mcb_app, as docs/deployment.md "Database roles" says, and as
// apps/worker/test/the-trail-cannot-be-erased-by-the-apps-role.test.ts makes one) may UPDATE only the columns of
// reviews and review_occurrences the apps write. Here the console and the worker both connect as such a role: every
// thing they do to reviews still works (open, count another occurrence, add one, re-verify, resolve, dismiss), and
// the finding itself (reason, details, event) cannot be rewritten by it.

const env = useTestEnv();
const role = `mcb_t_app_${randomBytes(4).toString('hex')}`;
let app: pg.Pool;
let appDb: Db;
let stack: OpsStack;
const AUTH = { authorization: `Bearer ${TOKEN}` };

function asRole(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  return u.toString();
}
/** The SQLSTATE a statement fails with, or 'ok'. */
async function codeOf(statement: string): Promise<string> {
  try {
    await app.query(statement);
    return 'ok';
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
}

beforeAll(async () => {
  await env.db.pool.query(`create role ${role} login in role mcb_app`);
  const appUrl = asRole(env.databaseUrl, role);
  app = new pg.Pool({ connectionString: appUrl, max: 2 });
  app.on('error', () => {});
  appDb = createDb(appUrl, { max: 5 });
  stack = await startOpsStack(env, { worker: { db: appDb.db }, consoleDeps: { db: appDb } });
});
afterAll(async () => {
  await stack?.close();
  await appDb?.close();
  await app?.end();
  await env.db.pool.query(`drop role if exists ${role}`);
});

const api = (method: 'GET' | 'POST', url: string, payload?: object) =>
  stack.app.inject({
    method,
    url,
    payload: method === 'POST' ? { reason: 'test: operator checked the platform', ...payload } : payload,
    headers: AUTH,
  });

/** A pay-in whose Get order reports another amount: the worker, as the role, opens a review. */
async function reviewedPayin() {
  const no = uid();
  const merchantOrderNo = `MO-${no}`;
  const orderNo = `P-${no}`;
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '100.00' });
  stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '99.00' }));
  const event = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '100.00' });
  await stack.add(event);
  const review = await waitFor(async () => {
    const [row] = await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo));
    return row;
  });
  return { merchantOrderNo, orderNo, event, reviewId: review.id };
}

async function reviewRow(id: number) {
  const [row] = await env.db.db.select().from(reviews).where(eq(reviews.id, id));
  return row!;
}

describe('reviews, with the console and the worker connected as a member of mcb_app', () => {
  it('open, count the same event again, add another, and keep open on a re-verify that still disagrees', async () => {
    const { merchantOrderNo, orderNo, event, reviewId } = await reviewedPayin();
    // The same event under another job id (ON CONFLICT DO UPDATE of occurrences and seen), then a different one.
    await stack.queue.add('payin', event, { jobId: `again-${orderNo}`, attempts: 1 });
    await waitFor(async () => (await reviewRow(reviewId)).occurrences === 2, { message: 'the copy was not counted' });
    await stack.queue.add('payin', payinEvent({ orderNo, merchantOrderNo, fiatAmount: '5000.00' }), {
      jobId: `other-${orderNo}`,
      attempts: 1,
    });
    await waitFor(async () => (await reviewRow(reviewId)).occurrences === 3, { message: 'the other was not added' });
    const occurrences = await env.db.db
      .select()
      .from(reviewOccurrences)
      .where(eq(reviewOccurrences.reviewId, reviewId))
      .orderBy(reviewOccurrences.id);
    expect(occurrences.map((o) => o.seen)).toEqual([2, 1]);
    const res = await api('POST', `/api/reviews/${reviewId}/reverify`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ outcome: 'review', review: { id: reviewId, status: 'open' } });
  });

  it('re-verify after Get order confirms: credited once and the review resolved by the commit', async () => {
    const { merchantOrderNo, orderNo, reviewId } = await reviewedPayin();
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '100.00' }));
    const res = await api('POST', `/api/reviews/${reviewId}/reverify`);
    expect(res.statusCode, res.body).toBe(200);
    expect(await reviewRow(reviewId)).toMatchObject({ status: 'resolved' });
    expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toHaveLength(1);
  });

  it('dismiss closes it with the note; a resolving attempt closes another', async () => {
    const { reviewId } = await reviewedPayin();
    const res = await api('POST', `/api/reviews/${reviewId}/dismiss`, { note: 'platform confirmed a test order' });
    expect(res.statusCode, res.body).toBe(200);
    expect(await reviewRow(reviewId)).toMatchObject({ status: 'dismissed', note: 'platform confirmed a test order' });
    const other = await reviewedPayin();
    const closed = await recordReviewAttempt(
      appDb.db,
      other.reviewId,
      { source: 'review', outcome: 'already-applied', reason: 'already applied' },
      { note: 'already applied' },
    );
    expect(closed).toBe(true);
    expect(await reviewRow(other.reviewId)).toMatchObject({ status: 'resolved', note: 'already applied' });
  });

  it("cannot rewrite a review's finding nor an occurrence's evidence, nor delete either", async () => {
    const { reviewId } = await reviewedPayin();
    const before = await reviewRow(reviewId);
    for (const set of [
      `reason = 'rewritten'`,
      `reason_code = 'REWRITTEN'`,
      `details = '{}'::jsonb`,
      `event = '{}'::jsonb`,
      `order_no = 'X'`,
      `state = 4`,
      `merchant_order_no = 'X'`,
      `kind = 'payout'`,
      `created_at = now()`,
    ])
      expect({ set, code: await codeOf(`update reviews set ${set} where id = ${reviewId}`) }).toEqual({
        set,
        code: '42501',
      });
    for (const set of [
      `reason = 'rewritten'`,
      `reason_code = 'REWRITTEN'`,
      `details = '{}'::jsonb`,
      `event = '{}'::jsonb`,
      `event_hash = 'x'`,
      `review_id = 1`,
      `first_seen_at = now()`,
    ])
      expect({ set, code: await codeOf(`update review_occurrences set ${set} where review_id = ${reviewId}`) }).toEqual(
        { set, code: '42501' },
      );
    expect(await codeOf(`delete from review_occurrences where review_id = ${reviewId}`)).toBe('42501');
    expect(await codeOf(`delete from reviews where id = ${reviewId}`)).toBe('42501');
    expect(await reviewRow(reviewId)).toEqual(before);
  });
});
