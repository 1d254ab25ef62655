import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantPauses, operatorActions, orders, reviews } from '@mcb/core/db';
import { createRedis, type Redis } from '@mcb/core/redis';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, count, eq } from 'drizzle-orm';
import type { TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { bearer, OPERATORS } from '../../apps/console/test/helpers/operators.ts';
import { routesOf } from '../../apps/console/src/operators/service-gate.ts';
import { ACTIONS } from '../../apps/console/src/operators/roles.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let redis: Redis;
let reviewId: number;
let failedJobId: string;
let failedOrderNo: string;
let delayedJobId: string;
let replayId: number;

/** A pay-in whose Get order reports another amount: the worker sends it to review. */
async function reviewedPayin() {
  const no = uid();
  const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '100.00' });
  stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '99.00' }));
  await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '100.00' }));
  const [review] = await waitFor(async () => {
    const rows = await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo));
    return rows.length ? rows : undefined;
  });
  return review!.id;
}

beforeAll(async () => {
  redis = createRedis(env.redisUrl, 'producer');
  stack = await startOpsStack(env, { worker: true, consoleDeps: { operators: OPERATORS, redis } });
  reviewId = await reviewedPayin();
  // A failed job (Get order keeps failing, 1 attempt) and a delayed one, for the dashboard's actions.
  const no = uid();
  await createOrder(env.db.db, { merchantOrderNo: `MO-${no}`, kind: 'payin', amount: '5.00' });
  stack.platform.failNext(`MO-${no}`, 1_000, 500);
  failedOrderNo = `MO-${no}`;
  failedJobId = await stack.add(payinEvent({ orderNo: `P-${no}`, merchantOrderNo: `MO-${no}`, fiatAmount: '5.00' }), 1);
  await waitFor(async () => (await stack.queue.getJobState(failedJobId)) === 'failed', { message: 'job did not fail' });
  const delayed = await stack.queue.add(
    'payin',
    payinEvent({ orderNo: `P-D-${no}`, merchantOrderNo: `MO-D-${no}`, fiatAmount: '1.00' }),
    { delay: 3_600_000, jobId: `payin-P-D-${no}-6` },
  );
  delayedJobId = delayed.id!;
  // A replay to cancel (of nothing: it ends at once; the role and reason are checked before its status).
  const replay = await stack.app.inject({
    method: 'POST',
    url: '/api/replays',
    headers: bearer('operator'),
    payload: { filter: { merchantOrderNo: 'MO-none' }, reason: 'setup' },
  });
  replayId = (replay.json() as { replay: { id: number } }).replay.id;
});
afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

/** Every route that changes something, with a body that is valid apart from the reason. */
const ACTION_ROUTES = (): ActionRoute[] => [
  { method: 'POST' as const, url: '/api/payins', payload: { merchantOrderNo: 'RSN-1', currency: 'PHP', amount: '10' } },
  {
    method: 'POST' as const,
    url: '/api/payouts',
    payload: { merchantOrderNo: 'RSN-2', currency: 'PHP', amount: '10', paymentMethod: 1, params: {} },
  },
  { method: 'POST' as const, url: `/api/reviews/${reviewId}/reverify`, payload: {} },
  { method: 'POST' as const, url: `/api/reviews/${reviewId}/dismiss`, payload: { note: 'forged' } },
  { method: 'POST' as const, url: '/api/reconcile', payload: {} },
  { method: 'PUT' as const, url: `/queues/api/queues/callbacks/${failedJobId}/retry` },
  { method: 'PUT' as const, url: `/queues/api/queues/callbacks/${delayedJobId}/promote` },
  { method: 'PUT' as const, url: '/queues/api/queues/callbacks/promote' },
  { method: 'POST' as const, url: '/api/replays', payload: { filter: { status: 'failed' } } },
  { method: 'POST' as const, url: `/api/replays/${replayId}/cancel`, payload: {} },
  { method: 'POST' as const, url: '/api/payment-methods/refresh', payload: {} },
  { method: 'POST' as const, url: `/api/orders/${failedOrderNo}/jobs/${failedJobId}/replay`, payload: {} },
  { method: 'POST' as const, url: '/api/merchants/default/pause', payload: {} },
  { method: 'POST' as const, url: '/api/merchants/default/resume', payload: {} },
];

/** Routes that are not GET yet change nothing an operator is accountable for (reason written here). */
const NOT_ACTIONS = new Set([
  'POST /api/payouts/validate', // validates only
]);

type ActionRoute = { method: 'POST' | 'PUT'; url: string; payload?: Record<string, unknown> };
/** The reason where each surface takes it: X-Reason for bull-board's routes, the JSON body for ours. */
const withReason = (r: ActionRoute, reason: string) =>
  r.url.startsWith('/queues/')
    ? { ...r, headers: { 'x-reason': reason } }
    : { ...r, payload: { ...r.payload, reason } };

async function unchanged() {
  const [review] = await env.db.db.select().from(reviews).where(eq(reviews.id, reviewId));
  const registered = await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'RSN-1'));
  return {
    review: review!.status,
    registered: registered.length,
    pauses: (await env.db.db.select({ n: count() }).from(merchantPauses))[0]!.n,
    failed: await stack.queue.getJobState(failedJobId),
    delayed: await stack.queue.getJobState(delayedJobId),
  };
}
const auditRows = async () => (await env.db.db.select({ n: count() }).from(operatorActions))[0]!.n;

describe('operator actions', () => {
  it('lists every state-changing API route in ACTION_ROUTES, so a new one cannot skip the reason and the role', async () => {
    const doc = (
      await stack.app.inject({ method: 'GET', url: '/api/openapi.json', headers: bearer('viewer') })
    ).json() as { paths: Record<string, Record<string, unknown>> };
    const changing = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops)
        .filter((m) => m !== 'get' && m !== 'head')
        .map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
    );
    const tested = ACTION_ROUTES().map(
      (r) =>
        `${r.method} ${r.url.replace(`/${reviewId}/`, '/:id/').replace(`/replays/${replayId}/`, '/replays/:id/').replace(`/orders/${failedOrderNo}/jobs/${failedJobId}/`, '/orders/:merchantOrderNo/jobs/:jobId/').replace('/merchants/default/', '/merchants/:ref/')}`,
    );
    for (const route of changing) if (!NOT_ACTIONS.has(route)) expect(tested).toContain(route);
  });

  it("lists every action row of the areas' route tables in ACTION_ROUTES, each naming an action of the role table", async () => {
    const rows = routesOf(stack.app).filter((r) => r.action !== undefined);
    expect(rows.length).toBeGreaterThan(10);
    for (const r of rows) expect(Object.keys(ACTIONS)).toContain(r.action);
    const tested = ACTION_ROUTES().map(
      (r) =>
        `${r.method} ${r.url.replace(`/${reviewId}/`, '/:id/').replace(`/replays/${replayId}/`, '/replays/:id/').replace(`/orders/${failedOrderNo}/jobs/${failedJobId}/`, '/orders/:merchantOrderNo/jobs/:jobId/').replace('/merchants/default/', '/merchants/:ref/')}`,
    );
    const actions = rows.filter((r) => r.action !== 'read').map((r) => `${r.method} ${r.url}`);
    expect(actions.length).toBeGreaterThanOrEqual(6);
    for (const route of actions) expect(tested).toContain(route);
    // Reads only: a row that reads answers GET, or validates (POST /api/payouts/validate, in NOT_ACTIONS).
    for (const r of rows.filter((x) => x.action === 'read' && x.method !== 'GET' && x.method !== 'HEAD'))
      expect(NOT_ACTIONS).toContain(`${r.method} ${r.url}`);
  });

  it('refuses each without a reason (400 REASON_REQUIRED) and changes nothing', async () => {
    const before = await unchanged();
    for (const route of ACTION_ROUTES()) {
      for (const blank of [undefined, '   ']) {
        const r: ActionRoute & { headers?: Record<string, string> } =
          blank === undefined ? route : withReason(route, blank);
        const res = await stack.app.inject({ ...r, headers: { ...r.headers, ...bearer('operator') } });
        expect(res.statusCode, `${route.method} ${route.url}`).toBe(400);
        expect(res.json(), `${route.method} ${route.url}`).toMatchObject({
          code: 'REASON_REQUIRED',
          errors: [{ field: 'reason' }],
        });
      }
    }
    expect(await unchanged()).toEqual(before);
  });

  it('refuses each with a reason no one can read (only invisible characters: REASON_REQUIRED) or one that reorders how the trail reads (bidi overrides: REQUEST_INVALID), and changes nothing', async () => {
    const before = await unchanged();
    const rowsBefore = await auditRows();
    // Zero-width space and non-joiner, soft hyphen, word joiner, a bidi isolate pair, a right-to-left mark.
    const invisible = ['\u200b', '\u200b\u200c\u00ad', '\u2060', '\u2066\u2069', '\u200f'];
    // A right-to-left override shows "ok, cause fixed" as something else in the audit page; embeddings and isolates likewise.
    const reordering = ['txen era \u202edexif esuac', 'ok \u202a fixed', 'ok \u2067fixed\u2069 now'];
    for (const route of ACTION_ROUTES()) {
      // bull-board's X-Reason arrives URI-encoded, as board-guard.js sends it (a header is Latin-1).
      const send = (reason: string) => {
        const r: ActionRoute & { headers?: Record<string, string> } = withReason(
          route,
          route.url.startsWith('/queues/') ? encodeURIComponent(reason) : reason,
        );
        return stack.app.inject({ ...r, headers: { ...r.headers, ...bearer('operator') } });
      };
      for (const reason of invisible) {
        const res = await send(reason);
        expect(res.statusCode, `${route.method} ${route.url} ${JSON.stringify(reason)}`).toBe(400);
        expect(res.json(), `${route.method} ${route.url}`).toMatchObject({
          code: 'REASON_REQUIRED',
          errors: [{ field: 'reason' }],
        });
      }
      for (const reason of reordering) {
        const res = await send(reason);
        expect(res.statusCode, `${route.method} ${route.url} ${JSON.stringify(reason)}`).toBe(400);
        expect(res.json(), `${route.method} ${route.url}`).toMatchObject({
          code: 'REQUEST_INVALID',
          errors: [{ field: 'reason' }],
        });
      }
    }
    expect(await unchanged()).toEqual(before);
    expect(await auditRows()).toBe(rowsBefore);
  });

  it('refuses each for a viewer (403 naming the role operator), records the attempt as denied, and changes nothing', async () => {
    const before = await unchanged();
    const rowsBefore = await auditRows();
    for (const route of ACTION_ROUTES()) {
      const r: ActionRoute & { headers?: Record<string, string> } = withReason(route, 'I am only looking');
      const res = await stack.app.inject({ ...r, headers: { ...r.headers, ...bearer('viewer') } });
      expect(res.statusCode, `${route.method} ${route.url}`).toBe(403);
      expect(res.json()).toMatchObject({ code: 'FORBIDDEN', requiredRole: 'operator' });
      expect((res.json() as { message: string }).message).toMatch(
        /needs the role operator; vera\.viewer@example\.com is viewer/,
      );
    }
    expect(await unchanged()).toEqual(before);
    expect(await auditRows()).toBe(rowsBefore + ACTION_ROUTES().length);
    const denied = await env.db.db.select().from(operatorActions).where(eq(operatorActions.outcome, 'denied'));
    expect(
      denied.every(
        (d) => d.operator === 'vera.viewer@example.com' && d.role === 'viewer' && d.reason === 'I am only looking',
      ),
    ).toBe(true);
  });

  it('lets an operator act with a reason, and records who, why and how it ended (a failure too)', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: `/api/reviews/${reviewId}/dismiss`,
      headers: bearer('operator'),
      payload: { reason: 'forged: the platform never had this order', note: 'ticket #4411' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ review: { status: 'dismissed', note: 'ticket #4411' } });
    const [row] = await env.db.db.select().from(operatorActions).where(eq(operatorActions.outcome, 'dismissed'));
    expect(row).toMatchObject({
      operator: 'otto.operator@example.com',
      role: 'operator',
      action: 'reviews.dismiss',
      target: `review:${reviewId}`,
      reason: 'forged: the platform never had this order',
      requestId: expect.any(String),
    });

    // Dashboard retry with X-Reason (URI-encoded by board-guard.js): done, and recorded with the decoded reason.
    const retry = await stack.app.inject({
      method: 'PUT',
      url: `/queues/api/queues/callbacks/${failedJobId}/retry`,
      headers: { ...bearer('operator'), 'x-reason': encodeURIComponent('Get order is back — retrying') },
    });
    expect(retry.statusCode).toBe(204);
    const retried = await waitFor(
      async () =>
        (
          await env.db.db
            .select()
            .from(operatorActions)
            .where(and(eq(operatorActions.action, 'queue.retry'), eq(operatorActions.outcome, 'done')))
        )[0],
    );
    expect(retried).toMatchObject({
      target: `job:callbacks/${failedJobId}`,
      reason: 'Get order is back — retrying',
      outcome: 'done',
    });

    // A failure of the action is recorded too (after its transaction rolled back).
    const again = await stack.app.inject({
      method: 'POST',
      url: `/api/reviews/${reviewId}/dismiss`,
      headers: bearer('operator'),
      payload: { reason: 'twice' },
    });
    expect(again.statusCode).toBe(409);
    const failed = await env.db.db.select().from(operatorActions).where(eq(operatorActions.reason, 'twice'));
    expect(failed).toMatchObject([{ outcome: 'failed:REVIEW_NOT_OPEN' }]);
  });

  it('keeps operator_actions append-only: UPDATE and DELETE are refused by the database itself', async () => {
    await expect(env.db.pool.query("update operator_actions set reason = 'edited'")).rejects.toThrow(
      /operator_actions is append-only \(UPDATE refused\)/,
    );
    // The one update allowed: an intent row (pending) completed once with its outcome; nothing else of it changes.
    const { rows } = await env.db.pool.query<{ id: string }>(
      "insert into operator_actions (operator, role, action, target, reason, outcome) values ('otto.operator@example.com', 'operator', 'reconcile.run', 'sweep', 'r', 'pending') returning id",
    );
    const id = rows[0]!.id;
    await expect(
      env.db.pool.query("update operator_actions set outcome = 'completed', reason = 'edited' where id = $1", [id]),
    ).rejects.toThrow(/append-only/);
    await env.db.pool.query("update operator_actions set outcome = 'completed' where id = $1", [id]);
    await expect(
      env.db.pool.query("update operator_actions set outcome = 'stopped-early' where id = $1", [id]),
    ).rejects.toThrow(/append-only/);
    await expect(env.db.pool.query('delete from operator_actions')).rejects.toThrow(
      /operator_actions is append-only \(DELETE refused\)/,
    );
    expect(await auditRows()).toBeGreaterThan(0);
  });
});

describe('GET /api/audit', () => {
  const audit = async (query: string, token: keyof typeof TOKENS) => {
    const res = await stack.app.inject({ method: 'GET', url: `/api/audit${query}`, headers: bearer(token) });
    return {
      status: res.statusCode,
      body: res.json() as {
        entries: { operator: string; action: string; id: number }[];
        nextBefore: number | null;
        scope: string;
        requiredRole?: string;
      },
    };
  };

  it("shows a viewer or operator their own actions only, and refuses them another operator's (403 naming admin)", async () => {
    const mine = await audit('', 'operator');
    expect(mine.status).toBe(200);
    expect(mine.body.scope).toBe('own');
    expect(mine.body.entries.length).toBeGreaterThan(0);
    expect(mine.body.entries.every((e) => e.operator === 'otto.operator@example.com')).toBe(true);
    const others = await audit('?operator=vera.viewer%40example.com', 'operator');
    expect(others).toMatchObject({ status: 403, body: { requiredRole: 'admin' } });
  });

  it("shows an admin everyone's, filtered by operator, action, target and time, newest first, page by page", async () => {
    const all = await audit('', 'admin');
    expect(all.body.scope).toBe('all');
    expect(new Set(all.body.entries.map((e) => e.operator))).toEqual(
      new Set(['vera.viewer@example.com', 'otto.operator@example.com']),
    );
    const ids = all.body.entries.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(
      (await audit('?action=reviews.dismiss', 'admin')).body.entries.every((e) => e.action === 'reviews.dismiss'),
    ).toBe(true);
    expect(
      (await audit(`?target=review:${reviewId}&operator=vera.viewer%40example.com`, 'admin')).body.entries,
    ).toHaveLength(2);
    expect((await audit('?from=2100-01-01T00:00:00Z', 'admin')).body.entries).toEqual([]);
    expect((await audit('?to=2000-01-01T00:00:00Z', 'admin')).body.entries).toEqual([]);

    const pages: number[] = [];
    let before: number | null = null;
    do {
      const page = await audit(`?limit=3${before ? `&before=${before}` : ''}`, 'admin');
      pages.push(...page.body.entries.map((e) => e.id));
      before = page.body.nextBefore;
    } while (before !== null);
    expect(pages).toEqual(ids);
    expect((await audit('?from=yesterday', 'admin')).status).toBe(400);
  });
});
