import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, operatorActions, orders, replays, reviews } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createRedis, type Redis } from '@mcb/core/redis';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq, sql } from 'drizzle-orm';
import { authorize, commitExternalAction, MAX_REASON } from '../../apps/console/src/audit/perform.ts';
import { sha256Hex } from '../../apps/console/src/operators/directory.ts';
import { bearer, OPERATORS } from '../../apps/console/test/helpers/operators.ts';
import { ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

/**
 * An action whose effect commits on its own (re-verify, sweep, dashboard retry, catalog refresh) writes its audit row
 * first; a reason that cannot be stored (NUL: Postgres refuses it in text) is refused before anything happens. Before
 * issue 43 the re-verify credited, the sweep ran and the retry ran, and then the audit row failed: an effect with no
 * record of who did it.
 */
const env = useTestEnv();
let stack: OpsStack;
let redis: Redis;

const SECOND_OPERATOR_TOKEN = 'olga-operator-token-0123456789ab';
const TEAM = [
  ...OPERATORS,
  { name: 'olga.operator@example.com', role: 'operator' as const, tokenSha256: sha256Hex(SECOND_OPERATOR_TOKEN) },
];
const olga = { authorization: `Bearer ${SECOND_OPERATOR_TOKEN}` };

/** Reasons that cannot be stored as written: refused with 400 before any effect. */
const UNSTORABLE = ['ok\u0000', 'a\u0007b', '\u001b[31mred', 'lone \ud800 surrogate'];

const auditCount = async () => (await env.db.db.select({ n: sql<number>`count(*)::int` }).from(operatorActions))[0]!.n;

beforeAll(async () => {
  redis = createRedis(env.redisUrl, 'producer');
  // The replays stay running (no driver): the cancel tests need one that is.
  stack = await startOpsStack(env, { worker: true, consoleDeps: { operators: TEAM, redis, replayDriver: false } });
});
afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

async function expectRefusedReason(res: { statusCode: number; json: () => unknown }, what: string) {
  expect(res.statusCode, what).toBe(400);
  expect(res.json(), what).toMatchObject({ code: 'REQUEST_INVALID', errors: [{ field: 'reason' }] });
}

describe('a reason that cannot be stored is refused and nothing happens', () => {
  it('re-verify: the review stays open and nothing is credited; with a plain reason it credits once, recorded', async () => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '500.00' });
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '499.00' }));
    await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '500.00' }));
    const review = await waitFor(
      async () => (await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo)))[0],
    );
    // Get order now confirms: a re-verify that ran would credit 500.
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '500.00' }));
    const rows = await auditCount();
    for (const reason of UNSTORABLE) {
      const res = await stack.app.inject({
        method: 'POST',
        url: `/api/reviews/${review.id}/reverify`,
        headers: bearer('operator'),
        payload: { reason },
      });
      await expectRefusedReason(res, JSON.stringify(reason));
    }
    expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toEqual([]);
    expect((await env.db.db.select().from(reviews).where(eq(reviews.id, review.id)))[0]!.status).toBe('open');
    expect(await auditCount()).toBe(rows);

    const ok = await stack.app.inject({
      method: 'POST',
      url: `/api/reviews/${review.id}/reverify`,
      headers: bearer('operator'),
      payload: { reason: 'amount fixed upstream' },
    });
    expect(ok.statusCode).toBe(200);
    expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toHaveLength(1);
    const [row] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.target, `review:${review.id}`));
    expect(row).toMatchObject({
      action: 'reviews.reverify',
      outcome: 'applied',
      reason: 'amount fixed upstream',
      operator: 'otto.operator@example.com',
    });
  });

  it('sweep: no Get order is asked and the order stays pending; with a plain reason it is credited', async () => {
    const merchantOrderNo = `MO-SW-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '500.00' });
    // Old enough for the sweep (RECONCILE_MIN_AGE 10m), and released by the platform.
    await env.db.db
      .update(orders)
      .set({ createdAt: sql`now() - interval '1 hour'` })
      .where(eq(orders.merchantOrderNo, merchantOrderNo));
    stack.platform.setOrder(
      platformOrder({
        orderNo: `P-${merchantOrderNo}`,
        merchantOrderNo,
        type: 'payin',
        state: 6,
        amountJson: '500.00',
      }),
    );
    const rows = await auditCount();
    for (const reason of UNSTORABLE) {
      await expectRefusedReason(
        await stack.app.inject({
          method: 'POST',
          url: '/api/reconcile',
          headers: bearer('operator'),
          payload: { reason },
        }),
        JSON.stringify(reason),
      );
    }
    expect(stack.platform.hits.get(merchantOrderNo) ?? 0).toBe(0);
    expect((await ledgerOf(env.db.db, merchantOrderNo)).order.status).toBe('pending');
    expect(await auditCount()).toBe(rows);

    const ok = await stack.app.inject({
      method: 'POST',
      url: '/api/reconcile',
      headers: bearer('operator'),
      payload: { reason: 'customer says paid' },
    });
    expect(ok.statusCode).toBe(200);
    expect((await ledgerOf(env.db.db, merchantOrderNo)).order.status).toBe('credited');
    const [row] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.reason, 'customer says paid'));
    expect(row).toMatchObject({ action: 'reconcile.run', outcome: 'completed' });
  });

  it('dashboard retry: the failed job stays failed and no row is written', async () => {
    const no = uid();
    await createOrder(env.db.db, { merchantOrderNo: `MO-${no}`, kind: 'payin', amount: '5.00' });
    stack.platform.failNext(`MO-${no}`, 1_000, 500);
    const jobId = await stack.add(
      payinEvent({ orderNo: `P-${no}`, merchantOrderNo: `MO-${no}`, fiatAmount: '5.00' }),
      1,
    );
    await waitFor(async () => (await stack.queue.getJobState(jobId)) === 'failed', { message: 'job did not fail' });
    const rows = await auditCount();
    for (const url of [`/queues/api/queues/callbacks/${jobId}/retry`]) {
      // board-guard.js sends the reason URI-encoded (a lone surrogate cannot be: encodeURIComponent refuses it).
      for (const reason of UNSTORABLE.filter((r) => r.isWellFormed())) {
        const res = await stack.app.inject({
          method: 'PUT',
          url,
          headers: { ...bearer('operator'), 'x-reason': encodeURIComponent(reason) },
        });
        expect(res.statusCode, `${url} ${JSON.stringify(reason)}`).toBe(400);
      }
      const raw = await stack.app.inject({
        method: 'PUT',
        url,
        headers: { ...bearer('operator'), 'x-reason': 'ok%00' },
      });
      expect(raw.statusCode).toBe(400);
    }
    expect(await stack.queue.getJobState(jobId)).toBe('failed');
    expect(await auditCount()).toBe(rows);
  });

  it('replay start and cancel: no replay is started, a running one stays running', async () => {
    const before = await env.db.db.select().from(replays);
    for (const reason of UNSTORABLE) {
      await expectRefusedReason(
        await stack.app.inject({
          method: 'POST',
          url: '/api/replays',
          headers: bearer('operator'),
          payload: { filter: { merchantOrderNo: 'MO-none' }, reason },
        }),
        JSON.stringify(reason),
      );
    }
    expect(await env.db.db.select().from(replays)).toEqual(before);
    const started = await stack.app.inject({
      method: 'POST',
      url: '/api/replays',
      headers: bearer('operator'),
      payload: { filter: { merchantOrderNo: 'MO-none' }, reason: 'replay nothing' },
    });
    expect(started.statusCode).toBe(202);
    const id = (started.json() as { replay: { id: number } }).replay.id;
    for (const reason of UNSTORABLE) {
      await expectRefusedReason(
        await stack.app.inject({
          method: 'POST',
          url: `/api/replays/${id}/cancel`,
          headers: bearer('operator'),
          payload: { reason },
        }),
        JSON.stringify(reason),
      );
    }
    expect((await env.db.db.select().from(replays).where(eq(replays.id, id)))[0]!.status).toBe('running');
  });

  it('catalog refresh: the platform is not asked', async () => {
    const asked = stack.platform.catalog.requests.length;
    for (const reason of UNSTORABLE) {
      await expectRefusedReason(
        await stack.app.inject({
          method: 'POST',
          url: '/api/payment-methods/refresh',
          headers: bearer('operator'),
          payload: { reason },
        }),
        JSON.stringify(reason),
      );
    }
    expect(stack.platform.catalog.requests.length).toBe(asked);
  });
});

describe('the reason is capped at MAX_REASON characters', () => {
  it('refuses one character more, in the JSON body and in X-Reason, and accepts exactly the cap', async () => {
    const long = 'x'.repeat(MAX_REASON + 1);
    const body = await stack.app.inject({
      method: 'POST',
      url: '/api/replays',
      headers: bearer('operator'),
      payload: { filter: { merchantOrderNo: 'MO-none' }, reason: long },
    });
    expect(body.statusCode).toBe(400);
    expect(body.json()).toMatchObject({ errors: [{ field: 'reason' }] });
    // X-Reason reaches the action layer with no schema in between: the cap there is the only one.
    const header = await stack.app.inject({
      method: 'PUT',
      url: '/queues/api/queues/callbacks/promote',
      headers: { ...bearer('operator'), 'x-reason': long },
    });
    expect(header.statusCode).toBe(400);
    expect(header.json()).toMatchObject({
      code: 'REQUEST_INVALID',
      errors: [{ field: 'reason', message: `at most ${MAX_REASON} characters` }],
    });
    const atCap = await stack.app.inject({
      method: 'PUT',
      url: '/queues/api/queues/callbacks/promote',
      headers: { ...bearer('operator'), 'x-reason': 'y'.repeat(MAX_REASON) },
    });
    expect(atCap.statusCode).toBeLessThan(300);
  });
});

describe("an operator cancelling another operator's replay", () => {
  it('is refused (403 naming admin, recorded as denied) and the replay keeps running; its owner and an admin may cancel', async () => {
    const start = async (reason: string) => {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/api/replays',
        headers: bearer('operator'),
        payload: { filter: { merchantOrderNo: 'MO-none' }, reason },
      });
      expect(res.statusCode).toBe(202);
      return (res.json() as { replay: { id: number } }).replay.id;
    };
    const status = async (id: number) => (await env.db.db.select().from(replays).where(eq(replays.id, id)))[0]!.status;
    const otto1 = await start('otto replays 1');
    const refused = await stack.app.inject({
      method: 'POST',
      url: `/api/replays/${otto1}/cancel`,
      headers: olga,
      payload: { reason: 'not mine, but still' },
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'FORBIDDEN', requiredRole: 'admin' });
    expect(await status(otto1)).toBe('running');
    const [denied] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.reason, 'not mine, but still'));
    expect(denied).toMatchObject({
      operator: 'olga.operator@example.com',
      action: 'replays.cancelOthers',
      outcome: 'denied',
    });
    // The page's form goes through the same action.
    const page = await stack.app.inject({
      method: 'POST',
      url: `/replays/${otto1}/cancel`,
      headers: { ...olga, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ reason: 'from the page' }).toString(),
    });
    expect(page.statusCode).toBe(403);
    expect(await status(otto1)).toBe('running');

    const own = await stack.app.inject({
      method: 'POST',
      url: `/api/replays/${otto1}/cancel`,
      headers: bearer('operator'),
      payload: { reason: 'mine' },
    });
    expect(own.statusCode).toBe(200);
    expect(await status(otto1)).toBe('cancelled');
    const otto2 = await start('otto replays 2');
    const byAdmin = await stack.app.inject({
      method: 'POST',
      url: `/api/replays/${otto2}/cancel`,
      headers: bearer('admin'),
      payload: { reason: 'stop it' },
    });
    expect(byAdmin.statusCode).toBe(200);
    expect(await status(otto2)).toBe('cancelled');
  });
});

describe('the intent row', () => {
  it('is written before the effect runs, and completed after; when it cannot be written the effect never runs', async () => {
    const logger = createLogger({ name: 'intent-test', level: 'silent' });
    const deps = { db: env.db.db, logger };
    const actor = {
      operator: { name: 'otto.operator@example.com', role: 'operator' as const },
      requestId: 'req-intent',
    };
    const auth = await authorize(deps, actor, { action: 'reconcile.run', target: 'sweep', reason: 'intent first' });
    let seenDuring: unknown;
    await commitExternalAction(deps, auth, async () => {
      seenDuring = (await env.db.db.select().from(operatorActions).where(eq(operatorActions.reason, 'intent first')))[0]
        ?.outcome;
      return { result: 1, outcome: 'completed' };
    });
    expect(seenDuring).toBe('pending');
    expect(
      (await env.db.db.select().from(operatorActions).where(eq(operatorActions.reason, 'intent first')))[0]!.outcome,
    ).toBe('completed');

    // A database that does not answer: the intent cannot be written, so the effect is not run.
    const down = createDb('postgres://postgres@127.0.0.1:1/none', { connectionTimeoutMs: 500 });
    let ran = false;
    try {
      await expect(
        commitExternalAction({ db: down.db, logger }, auth, async () => {
          ran = true;
          return { result: 1, outcome: 'completed' };
        }),
      ).rejects.toThrow();
    } finally {
      await down.pool.end();
    }
    expect(ran).toBe(false);
  });
});
