import { merchantPauses, operatorActions } from '@mcb/core/db';
import { metricValue } from '@mcb/core/metrics';
import { callbackJobId, callbackJobOptions, merchantKeys } from '@mcb/core/queue';
import type { Redis } from '@mcb/core/redis';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import {
  callbackFor,
  payinRecord,
  startMerchantsIngest,
  testMerchant,
  type MerchantsIngest,
  type TestMerchant,
} from '@mcb/testkit/ingest';
import { orderState } from '@mcb/testkit/worker';
import { and, eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer } from '../../apps/console/test/helpers/operators.ts';
import { startTwoMerchants, type TwoMerchants } from '../console/helpers/two-merchants.ts';

// Issue 51, "Pause and resume a merchant": two merchants, a and b, with real ingest, console and worker processes'
// runners on one database and Redis. While a is paused its callbacks are acknowledged and stored but not credited,
// its sweep credits nothing, the pause survives a worker restart and the loss of its Redis mirror, ingest refuses its
// callbacks past MERCHANT_PAUSED_MAX_BACKLOG, and b is credited throughout. After the resume, everything of a is
// credited once.
const MAX_BACKLOG = 4;
const DRAIN_RPS = 5;
const env = useTestEnv();
let A: TestMerchant;
let B: TestMerchant;
let stack: TwoMerchants;
let ingest: MerchantsIngest;
let consoleApp: FastifyInstance;
let redis: Redis;

beforeAll(async () => {
  A = testMerchant('a', 'M-PAUSE-A');
  B = testMerchant('b', 'M-PAUSE-B');
  ingest = await startMerchantsIngest({
    merchants: [A, B],
    prefix: env.prefix,
    env: {
      REDIS_URL: env.redisUrl,
      INGEST_ALLOW_VOLATILE_REDIS: 'true',
      MERCHANT_PAUSED_MAX_BACKLOG: String(MAX_BACKLOG),
    },
  });
  stack = await startTwoMerchants(env, {
    merchantNos: { a: A.merchantNo, b: B.merchantNo },
    // a's own Get order budget: the resume drains its backlog no faster.
    entries: { a: { getOrderRps: DRAIN_RPS } },
    // Every pending order is the sweep's at once, and the workers' scheduled sweep runs every second.
    env: { RECONCILE_MIN_AGE: '0ms', RECONCILE_INTERVAL: '1s' },
    listen: false,
  });
  ({ app: consoleApp, redis } = stack);
}, 60_000);

afterAll(async () => {
  await stack?.close();
  await ingest?.close();
});

/** A pay-in of `m` registered with us and released at its platform; its callback body. */
async function releasedPayin(m: TestMerchant, amount = 10) {
  const merchantOrderNo = `${m.ref.toUpperCase()}-${uid()}`;
  const orderNo = `P${merchantOrderNo}`;
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: String(amount), merchantNo: m.merchantNo });
  stack.merchants[m.ref as 'a' | 'b'].platform.setOrder(
    platformOrder({
      orderNo,
      merchantNo: m.merchantNo,
      merchantOrderNo,
      type: 'payin',
      state: 6,
      amountJson: `${amount}`,
    }),
  );
  const body = callbackFor(m, payinRecord(m, orderNo, { MerchantOrderNo: merchantOrderNo, FiatCurrency: amount }));
  return { merchantOrderNo, body };
}

const deliver = async (m: TestMerchant, body: string) => {
  const reply = await ingest.app.inject({
    method: 'POST',
    url: `/callbacks/m/${m.ref}`,
    headers: { 'content-type': 'application/json' },
    payload: body,
  });
  return [reply.statusCode, reply.body] as const;
};

/** Jobs of `m` stored and not run: waiting, or put back as delayed by a worker that took one as the pause began. */
const stored = async (m: TestMerchant) => {
  const counts = await ingest.lane(m.ref).queue.getJobCounts('waiting', 'delayed', 'active');
  return counts.waiting! + counts.delayed! + counts.active!;
};

const stateOf = (m: TestMerchant, no: string) => orderState(env.db.db, no, m.merchantNo);
const credited = (m: TestMerchant, no: string, message: string) =>
  waitFor(async () => (await stateOf(m, no)).order.status === 'credited', { message, timeoutMs: 15_000 });

const act = (verb: 'pause' | 'resume', ref: string, payload: object, role: 'operator' | 'viewer' = 'operator') =>
  consoleApp.inject({ method: 'POST', url: `/api/merchants/${ref}/${verb}`, headers: bearer(role), payload });

const metrics = async () => {
  const res = await fetch(`http://127.0.0.1:${stack.worker().metricsPort}/metrics`);
  return res.text();
};

describe('the pause API', () => {
  it('refuses without a reason (400), a viewer (403, audited as denied with the merchant), an unknown ref (404 naming it) and a resume of a running merchant (409); nothing paused', async () => {
    const noReason = await act('pause', 'a', {});
    expect([noReason.statusCode, noReason.json().code]).toEqual([400, 'REASON_REQUIRED']);
    const viewer = await act('pause', 'a', { reason: 'just looking' }, 'viewer');
    expect([viewer.statusCode, viewer.json()]).toEqual([403, expect.objectContaining({ requiredRole: 'operator' })]);
    const [denied] = await env.db.db
      .select()
      .from(operatorActions)
      .where(and(eq(operatorActions.action, 'merchants.pause'), eq(operatorActions.outcome, 'denied')));
    expect(denied).toMatchObject({ target: 'merchant:a', merchantNo: A.merchantNo, role: 'viewer' });
    const unknown = await act('pause', 'nosuch', { reason: 'typo' });
    expect([unknown.statusCode, unknown.json().code]).toEqual([404, 'NOT_FOUND']);
    expect(unknown.json().message).toContain('"nosuch"');
    const running = await act('resume', 'b', { reason: 'not paused' });
    expect([running.statusCode, running.json().code]).toEqual([409, 'MERCHANT_NOT_PAUSED']);
    expect(await env.db.db.select().from(merchantPauses)).toEqual([]);
  });
});

describe('a paused merchant', () => {
  const held: string[] = [];
  let lost: string;

  it('stops crediting within 2 s of the reply; its callbacks are acknowledged and stored, the other merchant is credited', async () => {
    // 1. Running: a's callback is credited (the lane works before the pause).
    const before = await releasedPayin(A);
    expect(await deliver(A, before.body)).toEqual([200, 'success']);
    await credited(A, before.merchantOrderNo, "a's pay-in not credited before the pause");

    // 2. Pause a; the lane holds within 2 s of the reply (a poll every 0.5 s).
    const res = await act('pause', 'a', { reason: 'suspected key leak' });
    const replied = Date.now();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ merchant: 'a', paused: true, pausedBy: 'otto.operator@example.com' });
    await waitFor(() => stack.worker().lane('a').pausedSince() !== undefined, { timeoutMs: 2000 });
    expect(Date.now() - replied).toBeLessThan(2000);
    expect(stack.worker().lane('a').callbacks.held('merchant-paused')).toBe(true);
    expect(stack.worker().lane('b').callbacks.held('merchant-paused')).toBe(false);
    const [row] = await env.db.db.select().from(operatorActions).where(eq(operatorActions.outcome, 'paused'));
    expect(row).toMatchObject({ action: 'merchants.pause', target: 'merchant:a', merchantNo: A.merchantNo });

    // 3. A callback of a is acknowledged and stored (waiting in its queue); b's are credited meanwhile.
    const payinA = await releasedPayin(A);
    held.push(payinA.merchantOrderNo);
    expect(await deliver(A, payinA.body)).toEqual([200, 'success']);
    for (let i = 0; i < 2; i++) {
      const payinB = await releasedPayin(B);
      expect(await deliver(B, payinB.body)).toEqual([200, 'success']);
      await credited(B, payinB.merchantOrderNo, "b's pay-in not credited while a is paused");
    }
    expect(await stored(A)).toBe(1);
    expect((await stateOf(A, payinA.merchantOrderNo)).order.status).toBe('pending');
    expect(stack.merchants.a.platform.hits.get(payinA.merchantOrderNo)).toBeUndefined();

    // 4. The worker exports the pause for MerchantPausedLong.
    const text = await metrics();
    expect(metricValue(text, 'mcb_merchant_paused', { merchant: 'a' })).toBe(1);
    expect(metricValue(text, 'mcb_merchant_paused', { merchant: 'b' })).toBe(0);
    expect(metricValue(text, 'mcb_merchant_paused_since_seconds', { merchant: 'a' })).toBeGreaterThan(0);
  });

  it('is not swept: a scheduled sweep is skipped and a sweep now answers 409 MERCHANT_PAUSED; its lost pay-in stays pending', async () => {
    // A pay-in released at the platform whose callback never came: the sweep's to find.
    lost = (await releasedPayin(A)).merchantOrderNo;
    const res = await consoleApp.inject({
      method: 'POST',
      url: '/api/reconcile',
      headers: bearer('operator'),
      payload: { reason: 'customer says they paid', merchant: 'a' },
    });
    expect([res.statusCode, res.json().code]).toEqual([409, 'MERCHANT_PAUSED']);
    // The scheduled sweeps (every second) come and are skipped.
    await waitFor(
      async () => metricValue(await metrics(), 'mcb_reconcile_sweeps_total', { merchant: 'a', result: 'paused' }) >= 2,
      { message: 'no scheduled sweep of a was skipped' },
    );
    expect((await stateOf(A, lost)).order.status).toBe('pending');
    expect(stack.merchants.a.platform.hits.get(lost)).toBeUndefined();
  });

  it('stays paused across a worker restart: the new runner reads the table before taking a job', async () => {
    await stack.restartWorker(async () => {
      const payinA = await releasedPayin(A);
      held.push(payinA.merchantOrderNo);
      expect(await deliver(A, payinA.body)).toEqual([200, 'success']);
    });
    expect(stack.worker().lane('a').pausedSince()).toBeInstanceOf(Date);
    const payinB = await releasedPayin(B);
    expect(await deliver(B, payinB.body)).toEqual([200, 'success']);
    await credited(B, payinB.merchantOrderNo, "b's pay-in not credited by the new runner");
    for (const no of held) expect((await stateOf(A, no)).order.status).toBe('pending');
    expect(await stored(A)).toBe(2);
  });

  it('stays paused when its Redis mirror is lost, and the workers rebuild the mirror', async () => {
    const key = merchantKeys(env.prefix, 'a').pausedMirror;
    expect(await redis.get(key)).not.toBeNull();
    await redis.del(key);
    await waitFor(async () => (await redis.get(key)) !== null, { message: 'the mirror was not rebuilt' });
    expect(stack.worker().lane('a').pausedSince()).toBeInstanceOf(Date);
    for (const no of held) expect((await stateOf(A, no)).order.status).toBe('pending');
  });

  it(`is refused 503 fail by ingest past ${MAX_BACKLOG} stored callbacks, the other merchant never`, async () => {
    let accepted = 0;
    const refusal = await waitFor(
      async () => {
        const payin = await releasedPayin(A);
        const reply = await deliver(A, payin.body);
        if (reply[0] === 200) {
          held.push(payin.merchantOrderNo);
          accepted += 1;
          return undefined;
        }
        return reply;
      },
      { message: 'no callback of a was refused', timeoutMs: 15_000 },
    );
    expect(refusal).toEqual([503, 'fail']);
    // Within the bound, give or take what arrived in one read's second.
    expect(await stored(A)).toBeGreaterThanOrEqual(MAX_BACKLOG);
    expect(accepted).toBeGreaterThan(0);
    const refused = await ingest.registry.metrics();
    expect(metricValue(refused, 'ingest_paused_backlog_refusals_total', { merchant: 'a' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(refused, 'ingest_paused_backlog_refusals_total', { merchant: 'b' })).toBe(0);
    const payinB = await releasedPayin(B);
    expect(await deliver(B, payinB.body)).toEqual([200, 'success']);
  });

  it('after the resume: credits every held callback once and the lost pay-in by the sweep, and ingest acknowledges it again', async () => {
    const res = await act('resume', 'a', { reason: 'keys rotated' });
    expect([res.statusCode, res.json()]).toEqual([200, expect.objectContaining({ merchant: 'a', paused: false })]);
    for (const no of [...held, lost]) await credited(A, no, `a's ${no} not credited after the resume`);
    for (const no of [...held, lost]) {
      const { ledger, receipts } = await stateOf(A, no);
      expect([ledger.length, receipts.length]).toEqual([1, 1]);
    }
    // Acknowledged again once ingest's read of the mirror (at most a second old) sees the resume.
    await waitFor(async () => (await deliver(A, (await releasedPayin(A)).body))[0] === 200, {
      message: 'ingest still refuses a after the resume',
    });
    const [resumed] = await env.db.db.select().from(operatorActions).where(eq(operatorActions.outcome, 'resumed'));
    expect(resumed).toMatchObject({ action: 'merchants.resume', target: 'merchant:a', merchantNo: A.merchantNo });
    expect(resumed!.details).toMatchObject({ pausedBy: 'otto.operator@example.com' });
    expect(await env.db.db.select().from(merchantPauses)).toEqual([]);
    expect(metricValue(await metrics(), 'mcb_merchant_paused', { merchant: 'a' })).toBe(0);
  });

  it(`drains a backlog after the resume within its Get order budget (getOrderRps ${DRAIN_RPS})`, async () => {
    expect((await act('pause', 'a', { reason: 'again' })).statusCode).toBe(200);
    await waitFor(() => stack.worker().lane('a').callbacks.held('merchant-paused'), { timeoutMs: 2000 });
    // 1. 20 callbacks of a stored while it is paused (as ingest stores them; the bound is not what is tested here).
    const n = 20;
    const nos: string[] = [];
    for (let i = 0; i < n; i++) nos.push((await releasedPayin(A)).merchantOrderNo);
    await ingest.lane('a').queue.addBulk(
      nos.map((no) => ({
        name: 'payin',
        data: { ...payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '10' }), merchantNo: A.merchantNo },
        opts: { ...callbackJobOptions, jobId: callbackJobId('payin', `P${no}`, 6) },
      })),
    );
    expect(await stored(A)).toBeGreaterThanOrEqual(n);
    // 2. Resumed: all credited, once each, no faster than the budget lets Get order go.
    expect((await act('resume', 'a', { reason: 'drain' })).statusCode).toBe(200);
    for (const no of nos) await credited(A, no, `${no} not credited after the resume`);
    const times: number[] = [];
    for (const no of nos) {
      const { ledger } = await stateOf(A, no);
      expect(ledger).toHaveLength(1);
      times.push(new Date(ledger[0]!.createdAt).getTime());
    }
    const spanMs = Math.max(...times) - Math.min(...times);
    // 20 credits at 5 a second take about 3.8 s (less the budget's small burst tolerance); unbounded, a fraction of one.
    expect(spanMs).toBeGreaterThan(2500);
  }, 30_000);
});
