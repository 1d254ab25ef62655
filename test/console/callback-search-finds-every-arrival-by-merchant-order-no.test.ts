import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals } from '@mcb/core/db';
import { createOrder, payinEvent, payoutEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { TOKEN, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true });
});
afterAll(async () => {
  await stack?.close();
});

type Row = {
  jobId: string;
  status: string;
  code: string | null;
  merchantOrderNo: string;
  amount: string | null;
  attempts: number;
  appliedAt: string | null;
  kind: string;
};
type Body = {
  callbacks: Row[];
  nextCursor: string | null;
  jobs: { jobId: string; state: string }[];
  timeline: { event: string }[];
};

const get = async (query: string) => {
  const res = await stack.app.inject({
    method: 'GET',
    url: `/api/callbacks?${query}`,
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  return res;
};
const search = async (query: string) => {
  const res = await get(query);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Body;
};

describe('the callback search, fed by the worker', () => {
  it('finds by merchant order number a job that failed for good (no receipt, no review), with its code, job and timeline', async () => {
    const no = uid();
    const merchantOrderNo = `MO-${no}`;
    const orderNo = `P-${no}`;
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '55.00' });
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '55.00' }));
    stack.platform.failNext(merchantOrderNo, 1000, 500);
    const jobId = await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '55.00' }), 2);

    const body = await waitFor(
      async () => {
        const b = await search(`merchantOrderNo=${merchantOrderNo}`);
        return b.callbacks[0]?.status === 'failed' ? b : undefined;
      },
      { timeoutMs: 15_000, message: 'the failed job never showed in the search' },
    );
    expect(body.callbacks).toEqual([
      expect.objectContaining({
        jobId,
        merchantOrderNo,
        status: 'failed',
        code: 'PLATFORM_HTTP_ERROR',
        attempts: 2,
        amount: '55.00',
        appliedAt: null,
      }),
    ]);
    expect(body.jobs).toEqual([expect.objectContaining({ jobId, state: 'failed' })]);
    expect(body.timeline.map((e) => e.event)).toEqual(
      expect.arrayContaining(['received', 'attempt-failed', 'job-failed']),
    );
    // The order view tells the same story (it found nothing before the arrivals table).
    const order = await stack.app.inject({
      method: 'GET',
      url: `/api/orders/${merchantOrderNo}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect((order.json() as { timeline: { event: string }[] }).timeline.map((e) => e.event)).toContain('job-failed');
  });

  it('shows a credited callback as applied with its receipt time, and a payout by kind', async () => {
    const no = uid();
    const merchantOrderNo = `MO-${no}`;
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '12.00' });
    stack.platform.setOrder(
      platformOrder({ orderNo: `P-${no}`, merchantOrderNo, type: 'payin', state: 6, amountJson: '12.00' }),
    );
    await stack.add(payinEvent({ orderNo: `P-${no}`, merchantOrderNo, fiatAmount: '12.00' }));
    const out = `PO-${no}`;
    await createOrder(env.db.db, { merchantOrderNo: out, kind: 'payout', amount: '7.00' });
    stack.platform.setOrder(
      platformOrder({ orderNo: `Q-${no}`, merchantOrderNo: out, type: 'payout', state: 4, amountJson: '7.00' }),
    );
    await stack.add(payoutEvent({ orderNo: `Q-${no}`, merchantOrderNo: out, state: 4 }));

    const credited = await waitFor(
      async () => (await search(`merchantOrderNo=${merchantOrderNo}`)).callbacks.find((c) => c.status === 'applied'),
      { timeoutMs: 15_000 },
    );
    expect(credited.appliedAt).not.toBeNull();
    const payout = await waitFor(
      async () => (await search(`merchantOrderNo=${out}&kind=payout`)).callbacks.find((c) => c.status === 'applied'),
      { timeoutMs: 15_000 },
    );
    expect(payout).toMatchObject({ kind: 'payout', amount: null });
    expect((await search(`merchantOrderNo=${out}&kind=payin`)).callbacks).toEqual([]);
  });
});

describe('filters and pagination', () => {
  const tag = `F-${uid()}`;
  beforeAll(async () => {
    const base = Date.parse('2026-01-01T00:00:00.000Z');
    // 25 pay-ins of one merchant order family, one second apart, amounts 1..25, every fifth failed for good.
    await env.db.db.insert(callbackArrivals).values(
      Array.from({ length: 25 }, (_, i) => ({
        jobId: `payin-${tag}-${i}-6`,
        kind: 'payin' as const,
        orderNo: `${tag}-${i}`,
        state: 6,
        merchantOrderNo: `${tag}-M${i % 5}`,
        amount: `${i + 1}.00`,
        receivedAt: new Date(base + i * 1000),
        firstSeenAt: new Date(base + i * 1000 + 5),
        updatedAt: new Date(base + i * 1000 + 10),
        attempts: 1,
        status: i % 5 === 0 ? ('failed' as const) : ('review' as const),
        lastCode: i % 5 === 0 ? 'PLATFORM_HTTP_ERROR' : 'VERIFY_AMOUNT_MISMATCH',
      })),
    );
  });

  it('narrows by status, code, amount range and time range together, newest first', async () => {
    const failed = await search(`status=failed&from=2026-01-01T00:00:00Z&to=2026-01-01T00:01:00Z`);
    expect(failed.callbacks.map((c) => c.jobId)).toEqual([20, 15, 10, 5, 0].map((i) => `payin-${tag}-${i}-6`));
    const code = await search(
      `code=VERIFY_AMOUNT_MISMATCH&amountMin=3&amountMax=6.5&from=2026-01-01T00:00:00Z&to=2026-01-01T00:01:00Z`,
    );
    // 3.00 to 6.00 are i = 2..5; i = 5 failed with another code.
    expect(code.callbacks.map((c) => c.amount)).toEqual(['5.00', '4.00', '3.00']);
    const window = await search(`from=2026-01-01T00:00:03Z&to=2026-01-01T00:00:05Z`);
    expect(window.callbacks.map((c) => c.jobId)).toEqual([`payin-${tag}-4-6`, `payin-${tag}-3-6`]);
    expect((await search(`merchantOrderNo=${tag}-M2`)).callbacks).toHaveLength(5);
  });

  it('walks every row once, page by page, with the cursor', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Body = await search(
        `from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z&limit=7${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...page.callbacks.map((c) => c.jobId));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(4);
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => `payin-${tag}-${24 - i}-6`));
  });

  it('refuses bad input with 400: no filter, a foreign cursor, a number for an amount, an unknown status or field', async () => {
    for (const q of [
      '',
      'cursor=abc&status=failed',
      'amountMin=1e3',
      'status=lost',
      'color=red',
      'from=yesterday',
      'limit=0',
    ]) {
      const res = await get(q);
      expect(res.statusCode, q).toBe(400);
      expect(res.json()).toMatchObject({ code: 'REQUEST_INVALID' });
    }
  });
});
