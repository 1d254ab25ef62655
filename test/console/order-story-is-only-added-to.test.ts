import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorActions } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { bearer, OPERATORS } from '../../apps/console/test/helpers/operators.ts';
import { browserHeaders, ledgerOf, login, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let cookie: string;

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true, consoleDeps: { operators: OPERATORS } });
  cookie = await login(stack.app);
});
afterAll(async () => {
  await stack?.close();
});

interface Entry {
  event: string;
  attempt: number | null;
  code: string | null;
  detail: string;
  jobId: string | null;
  operator?: string | null;
  reason?: string | null;
  link?: string | null;
}

async function timeline(merchantOrderNo: string): Promise<Entry[]> {
  const res = await stack.app.inject({
    method: 'GET',
    url: `/api/orders/${merchantOrderNo}`,
    headers: bearer('viewer'),
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { timeline: Entry[] }).timeline;
}

async function settled(jobId: string, state: 'completed' | 'failed', sinceFinishedOn = 0) {
  return waitFor(
    async () => {
      const job = await stack.queue.getJob(jobId);
      return job && job.finishedOn && job.finishedOn > sinceFinishedOn && (await job.getState()) === state
        ? job
        : undefined;
    },
    { timeoutMs: 10_000, message: `job ${jobId} did not become ${state}` },
  );
}

async function payin(amount: string) {
  const no = uid();
  const o = { merchantOrderNo: `MO-STORY-${no}`, orderNo: `P-STORY-${no}` };
  await createOrder(env.db.db, { ...o, kind: 'payin', amount });
  stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: amount }));
  return { ...o, event: payinEvent({ ...o, fiatAmount: amount }) };
}

const replay = (merchantOrderNo: string, jobId: string, who: 'viewer' | 'operator', reason?: string) =>
  stack.app.inject({
    method: 'POST',
    url: `/api/orders/${merchantOrderNo}/jobs/${jobId}/replay`,
    headers: bearer(who),
    payload: reason === undefined ? {} : { reason },
  });

describe("an order's story is only added to", () => {
  it('a dashboard retry of a credited job keeps "credited" and adds the duplicate and a row naming who retried and why', async () => {
    const { merchantOrderNo, event } = await payin('100.50');
    const jobId = await stack.add(event);
    const job = await settled(jobId, 'completed');
    const put = await stack.app.inject({
      method: 'PUT',
      url: `/queues/api/queues/callbacks/${jobId}/retry`,
      headers: { ...browserHeaders(cookie), 'x-reason': encodeURIComponent('customer says not credited') },
    });
    expect(put.statusCode, put.body).toBe(204);
    await settled(jobId, 'completed', job.finishedOn);

    const entries = await timeline(merchantOrderNo);
    const settledRows = entries.filter((e) => e.event === 'attempt-settled').map((e) => e.detail);
    expect(settledRows).toEqual(['attempt 1 settled it: credited', 'attempt 1 settled it: duplicate']);
    const retried = entries.filter((e) => e.event === 'operator-action');
    expect(retried).toHaveLength(1);
    expect(retried[0]).toMatchObject({
      jobId,
      operator: 'admin',
      reason: 'customer says not credited',
      link: `/audit?target=${encodeURIComponent(`job:callbacks/${jobId}`)}`,
    });
    expect(retried[0]!.detail).toMatch(/^job retried from the dashboard by admin: customer says not credited$/);
    // The retry comes after the credit and before the duplicate.
    const order = entries
      .map((e) => (e.event === 'attempt-settled' ? e.detail.split(': ')[1] : e.event))
      .filter((x) => ['credited', 'operator-action', 'duplicate'].includes(x!));
    expect(order).toEqual(['credited', 'operator-action', 'duplicate']);
    expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toHaveLength(1);
  });

  it('"Replay this job": operator and a reason, audited (intent first), a fresh budget; the failure stays; viewer 403; not failed 409', async () => {
    const { merchantOrderNo, event } = await payin('42.00');
    stack.platform.failNext(merchantOrderNo, 1_000, 500);
    const jobId = await stack.add(event, 3);
    await settled(jobId, 'failed');
    expect((await stack.queue.getJob(jobId))!.attemptsMade).toBe(3);

    // A viewer is refused (and the refusal is audited); an operator without a reason is refused; nothing moved.
    const denied = await replay(merchantOrderNo, jobId, 'viewer', 'please');
    expect(denied.statusCode, denied.body).toBe(403);
    const noReason = await replay(merchantOrderNo, jobId, 'operator');
    expect(noReason.statusCode, noReason.body).toBe(400);
    expect(noReason.json()).toMatchObject({ code: 'REASON_REQUIRED' });
    // Another order's number does not reach this job (refused, nothing recorded against the job).
    const other = await payin('1.00');
    const wrongOrder = await replay(other.merchantOrderNo, jobId, 'operator', 'wrong order');
    expect(wrongOrder.statusCode, wrongOrder.body).toBe(404);
    expect(await (await stack.queue.getJob(jobId))!.getState()).toBe('failed');

    // The platform is back; the operator replays it.
    stack.platform.failNext(merchantOrderNo, 0, 500);
    const ok = await replay(merchantOrderNo, jobId, 'operator', 'Get order fixed, customer paid');
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toEqual({ jobId, attemptsBefore: 3 });
    const job = await settled(jobId, 'completed');
    // A fresh budget: the settling attempt is the first of a new count, not a fourth of the old one.
    expect(job.attemptsMade).toBe(1);
    expect((await ledgerOf(env.db.db, merchantOrderNo)).order.status).toBe('credited');

    const audit = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.target, `job:callbacks/${jobId}`));
    expect(audit.map((a) => [a.operator, a.action, a.outcome, a.reason])).toEqual([
      ['vera.viewer@example.com', 'queue.retry', 'denied', 'please'],
      ['otto.operator@example.com', 'queue.retry', 'replayed', 'Get order fixed, customer paid'],
    ]);
    expect(audit[1]!.details).toMatchObject({ via: 'order-page', merchantOrderNo, attemptsBefore: 3 });

    // The story: three failed attempts, the failure for good, the replay (who, why), then the credit.
    const entries = await timeline(merchantOrderNo);
    const events = entries.filter((e) => e.jobId === jobId && e.event !== 'received').map((e) => e.event);
    expect(events).toEqual([
      'attempt-failed',
      'attempt-failed',
      'attempt-failed',
      'job-failed',
      'operator-action',
      'attempt-settled',
      'applied',
      'ledger-entry',
    ]);
    const row = entries.find((e) => e.event === 'operator-action')!;
    expect(row.detail).toBe(
      'job replayed from the order page by otto.operator@example.com: Get order fixed, customer paid',
    );
    expect(entries.find((e) => e.event === 'job-failed')!.detail).toMatch(
      /^failed for good after 3 attempt\(s\), kept for replay/,
    );

    // Replaying a job that is not failed changes nothing.
    const again = await replay(merchantOrderNo, jobId, 'operator', 'again');
    expect(again.statusCode, again.body).toBe(409);
    expect(again.json()).toMatchObject({ code: 'JOB_NOT_FAILED' });
  });

  it("a re-verify that could not finish is in the review's history and on the order's story, with who and why", async () => {
    const no = uid();
    const o = { merchantOrderNo: `MO-REV-${no}`, orderNo: `P-REV-${no}` };
    await createOrder(env.db.db, { ...o, kind: 'payin', amount: '100.00' });
    stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '99.00' }));
    await stack.add(payinEvent({ ...o, fiatAmount: '100.00' }));
    const listed = async () => {
      const res = await stack.app.inject({
        method: 'GET',
        url: `/api/reviews?status=open&merchantOrderNo=${o.merchantOrderNo}`,
        headers: bearer('operator'),
      });
      return (
        res.json() as {
          reviews: {
            id: number;
            attempts: { outcome: string; reasonCode: string | null; reason: string; operator?: string | null }[];
          }[];
        }
      ).reviews;
    };
    const [review] = await waitFor(async () => ((await listed()).length ? await listed() : undefined), {
      message: 'no review opened',
    });
    expect(review!.attempts).toEqual([]);

    stack.platform.failNext(o.merchantOrderNo, 1_000, 500);
    const res = await stack.app.inject({
      method: 'POST',
      url: `/api/reviews/${review!.id}/reverify`,
      headers: bearer('operator'),
      payload: { reason: 'platform says it paid 100' },
    });
    expect(res.statusCode, res.body).toBeGreaterThanOrEqual(500);
    stack.platform.failNext(o.merchantOrderNo, 0, 500);

    const [after] = await listed();
    expect(after!.attempts).toHaveLength(1);
    expect(after!.attempts[0]).toMatchObject({
      outcome: 'failed',
      operator: 'otto.operator@example.com',
      reasonCode: res.json().code,
    });
    expect(after!.attempts[0]!.reason).toContain('platform says it paid 100');
    const row = (await timeline(o.merchantOrderNo)).find((e) => e.event === 'operator-action')!;
    expect(row.detail).toBe(
      `review ${review!.id} re-verified by otto.operator@example.com (failed:${res.json().code}): platform says it paid 100`,
    );
  });

  it('the landing page counts suspected forgeries and links the preset that lists them (the amount mismatch above)', async () => {
    const landing = await stack.app.inject({ method: 'GET', url: '/search', headers: bearer('viewer') });
    expect(landing.statusCode, landing.body).toBe(200);
    const link =
      /<a href="(\/callbacks\?[^"]+)"><strong data-count="forgeries">(\d+)<\/strong> suspected forger(?:y|ies)<\/a>/.exec(
        landing.body,
      );
    expect(link, 'no suspected forgeries count').not.toBeNull();
    expect(link![2]).toBe('1');
    const href = link![1]!.replaceAll('&amp;', '&');
    expect(href).toContain('code=VERIFY_DIFFERS_FROM_APPLIED');
    const list = await stack.app.inject({ method: 'GET', url: href, headers: bearer('viewer') });
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain('1 callback(s) match');
    expect(list.body).toContain('VERIFY_AMOUNT_MISMATCH');
    expect(list.body).toMatch(/aria-current="page"[^>]*>Suspected forgeries</);
  });
});
