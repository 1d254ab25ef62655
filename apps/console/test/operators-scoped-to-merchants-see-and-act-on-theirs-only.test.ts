import { callbackArrivals, merchantPauses, operatorActions, orderEvents, orders, reviews } from '@mcb/core/db';
import { createRedis } from '@mcb/core/redis';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { UnrecoverableError, Worker } from 'bullmq';
import { desc, eq, sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantQueues } from '../src/callbacks/merchant-queues.ts';
import { createOperatorDirectory, sha256Hex, type OperatorEntry } from '../src/operators/directory.ts';
import { AUTH, TOKEN, WIRE_CATALOG } from './helpers/fake-platform.ts';
import { startMerchantsConsole, type MerchantsConsole } from './helpers/merchants-console.ts';

// Two merchants, a and b; operators scoped to b (an operator, a viewer, a service) beside CONSOLE_TOKEN's admin, who
// sees both. A scoped operator must see nothing of a and act on nothing of a (403 with a `denied` row naming a).
const env = useTestEnv();
const TOKENS = { bOperator: 'b-operator-token-0123456789abcdef', bViewer: 'b-viewer-token-0123456789abcdef' };
const SHOP_B = 'shop-b-service-token-0123456789ab';
const OPERATORS: OperatorEntry[] = [
  { name: 'bo@b.example', role: 'operator', tokenSha256: sha256Hex(TOKENS.bOperator), merchants: ['b'] },
  { name: 'bv@b.example', role: 'viewer', tokenSha256: sha256Hex(TOKENS.bViewer), merchants: ['b'] },
  { name: 'shop-b', role: 'service', tokenSha256: sha256Hex(SHOP_B), merchants: ['b'] },
];
const B_OPERATOR = { authorization: `Bearer ${TOKENS.bOperator}` };
const B_VIEWER = { authorization: `Bearer ${TOKENS.bViewer}` };
const SHOP = { authorization: `Bearer ${SHOP_B}` };

let stack: MerchantsConsole;
let queues: MerchantQueues;
let app: FastifyInstance;
const failedJob: Record<'a' | 'b', string> = { a: '', b: '' };
const review: Record<'a' | 'b', number> = { a: 0, b: 0 };
let replayOfA = 0;

async function failOneJob(ref: 'a' | 'b') {
  const mq = queues.of(ref);
  const job = await mq.queue.add('payin', { merchantOrderNo: `ORD-${ref}`, orderNo: `P-${ref}-1` });
  const connection = createRedis(env.redisUrl, 'worker');
  const worker = new Worker(
    mq.queue.name,
    async () => {
      throw new UnrecoverableError('scripted');
    },
    { connection, prefix: mq.queue.opts.prefix },
  );
  try {
    await waitFor(async () => (await mq.queue.getJobState(job.id!)) === 'failed', { message: 'job did not fail' });
  } finally {
    await worker.close();
    await connection.quit();
  }
  failedJob[ref] = job.id!;
}

async function openReview(merchantNo: string, ref: string): Promise<number> {
  const [row] = await env.db.db
    .insert(reviews)
    .values({
      kind: 'payin',
      merchantNo,
      orderNo: `P-R-${ref}`,
      state: 1,
      merchantOrderNo: `MO-R-${ref}`,
      reasonCode: 'VERIFY_AMOUNT_MISMATCH',
      reason: 'scripted',
      event: {},
    })
    .returning({ id: reviews.id });
  return row!.id;
}

beforeAll(async () => {
  stack = await startMerchantsConsole(env, {
    catalogs: { a: WIRE_CATALOG.currencies, b: WIRE_CATALOG.currencies },
    env: { RECONCILE_MIN_AGE: '0ms', RECONCILE_RATE: '200' },
    operators: OPERATORS,
  });
  ({ app, queues } = stack);
  await failOneJob('a');
  await failOneJob('b');
  // The worker's rows of the two failed jobs (what the lists and counts read).
  for (const [ref, no] of [
    ['a', 'M-A'],
    ['b', 'M-B'],
  ] as const) {
    const now = new Date();
    await env.db.db.insert(callbackArrivals).values({
      jobId: failedJob[ref],
      merchantNo: no,
      kind: 'payin',
      orderNo: `P-${ref}-1`,
      state: 1,
      merchantOrderNo: `ORD-${ref}`,
      amount: '10',
      receivedAt: now,
      firstSeenAt: now,
      updatedAt: now,
      attempts: 1,
      status: 'failed',
      lastCode: 'PLATFORM_HTTP_ERROR',
    });
  }
  review.a = await openReview('M-A', 'a');
  review.b = await openReview('M-B', 'b');
  // One order of each merchant (by the admin), and an event of each on the feed.
  for (const ref of ['a', 'b']) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: AUTH,
      payload: { reason: 'setup', merchant: ref, merchantOrderNo: `ORD-${ref}`, currency: 'PHP', amount: '10.00' },
    });
    expect(res.statusCode).toBe(201);
  }
  const started = await app.inject({
    method: 'POST',
    url: '/api/replays',
    headers: AUTH,
    payload: { reason: 'setup', filter: { merchant: 'a', status: 'failed' }, ratePerSecond: 1 },
  });
  expect(started.statusCode, started.body).toBe(202);
  replayOfA = started.json().replay.id;
  for (const no of ['M-A', 'M-B']) {
    const [o] = await env.db.db.select().from(orders).where(eq(orders.merchantNo, no));
    await env.db.db.insert(orderEvents).values({
      merchantNo: no,
      orderId: o!.id,
      merchantOrderNo: o!.merchantOrderNo,
      eventType: 'payin.credited',
      payload: { merchantOrderNo: o!.merchantOrderNo },
      createdAt: sql`now() - interval '1 minute'`,
    });
  }
});

afterAll(async () => {
  await stack?.close();
});

const inject = (method: 'GET' | 'POST' | 'PUT', url: string, headers: Record<string, string>, payload?: object) =>
  app.inject({ method, url, headers, ...(payload ? { payload } : {}) });

/** The newest audit row of `operator`. */
async function lastRow(operator: string) {
  const [row] = await env.db.db
    .select()
    .from(operatorActions)
    .where(eq(operatorActions.operator, operator))
    .orderBy(desc(operatorActions.id))
    .limit(1);
  return row;
}

describe("an operator scoped to b acting on a's work", () => {
  const actions = (ref: 'a' | 'b') => [
    { name: 're-verify', method: 'POST' as const, url: `/api/reviews/${review[ref]}/reverify`, body: {} },
    { name: 'dismiss', method: 'POST' as const, url: `/api/reviews/${review[ref]}/dismiss`, body: {} },
    {
      name: 'replay start',
      method: 'POST' as const,
      url: '/api/replays',
      body: { filter: { merchant: ref, status: 'failed' }, ratePerSecond: 5 },
    },
    {
      name: 'replay this job',
      method: 'POST' as const,
      url: `/api/orders/ORD-${ref}/jobs/${failedJob[ref]}/replay`,
      body: {},
    },
    { name: 'sweep now', method: 'POST' as const, url: '/api/reconcile', body: { merchant: ref } },
    {
      name: 'registration',
      method: 'POST' as const,
      url: '/api/payins',
      body: { merchant: ref, merchantOrderNo: `NEW-${ref}`, currency: 'PHP', amount: '1.00' },
    },
    {
      name: 'catalog refresh',
      method: 'POST' as const,
      url: `/api/payment-methods/refresh?merchant=${ref}`,
      body: {},
    },
    // Last: b paused by the operator scoped to b is resumed at once, before anything else of b runs.
    { name: 'pause', method: 'POST' as const, url: `/api/merchants/${ref}/pause`, body: {} },
    { name: 'resume', method: 'POST' as const, url: `/api/merchants/${ref}/resume`, body: {} },
  ];

  for (const who of [
    { label: 'a viewer scoped to b', headers: B_VIEWER, name: 'bv@b.example' },
    { label: 'an operator scoped to b', headers: B_OPERATOR, name: 'bo@b.example' },
  ]) {
    it(`${who.label} gets 403 with a denied row carrying a's merchant on every action on a`, async () => {
      for (const a of actions('a')) {
        const res = await inject(a.method, a.url, who.headers, { reason: 'trying', ...a.body });
        expect(res.statusCode, `${a.name}: ${res.body}`).toBe(403);
        const row = await lastRow(who.name);
        expect(row, a.name).toMatchObject({ outcome: 'denied', merchantNo: 'M-A' });
      }
      // Nothing of a changed.
      const [ra] = await env.db.db.select().from(reviews).where(eq(reviews.id, review.a));
      expect(ra!.status).toBe('open');
      expect(await queues.of('a').queue.getJobState(failedJob.a)).toBe('failed');
      expect(await env.db.db.select().from(orders).where(eq(orders.merchantOrderNo, 'NEW-a'))).toEqual([]);
      expect(await env.db.db.select().from(merchantPauses)).toEqual([]);
    });
  }

  it("the pages' forms for a's work are 403 too, each with a denied row naming a, for a viewer and an operator scoped to b", async () => {
    const forms: { name: string; url: string; form: Record<string, string> }[] = [
      { name: 're-verify', url: `/reviews/${review.a}/reverify`, form: { back: '/reviews' } },
      { name: 'dismiss', url: `/reviews/${review.a}/dismiss`, form: { back: '/reviews' } },
      { name: 'replay this job', url: `/orders/ORD-a/jobs/${failedJob.a}/replay`, form: {} },
      { name: 'replay start', url: '/replays', form: { merchant: 'a', status: 'failed', ratePerSecond: '5' } },
      { name: 'pause', url: '/merchants/a/pause', form: {} },
    ];
    for (const who of [
      { headers: B_VIEWER, name: 'bv@b.example' },
      { headers: B_OPERATOR, name: 'bo@b.example' },
    ]) {
      for (const f of forms) {
        const res = await app.inject({
          method: 'POST',
          url: f.url,
          headers: { ...who.headers, accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({ reason: 'trying from the page', ...f.form }).toString(),
        });
        expect(res.statusCode, `${who.name} ${f.name}: ${res.body.slice(0, 200)}`).toBe(403);
        expect(await lastRow(who.name), `${who.name} ${f.name}`).toMatchObject({
          outcome: 'denied',
          merchantNo: 'M-A',
        });
      }
    }
    const [ra] = await env.db.db.select().from(reviews).where(eq(reviews.id, review.a));
    expect(ra!.status).toBe('open');
    expect(await queues.of('a').queue.getJobState(failedJob.a)).toBe('failed');
    expect(await env.db.db.select().from(merchantPauses)).toEqual([]);
  });

  it("the same actions on b's work go through for the operator scoped to b, each row naming b", async () => {
    // Replay this job first (a replay start would send the job back itself).
    const ordered = actions('b').sort((x) => (x.name === 'replay this job' ? -1 : 0));
    for (const a of ordered) {
      const res = await inject(a.method, a.url, B_OPERATOR, { reason: 'fixing b', ...a.body });
      // The scripted review holds no event to re-verify: past the scope check, the action itself says so.
      const expected = a.name === 're-verify' ? [400] : [200, 201, 202];
      expect(expected, `${a.name}: ${res.body}`).toContain(res.statusCode);
      const row = await lastRow('bo@b.example');
      expect(row?.outcome, a.name).not.toBe('denied');
      expect(row?.merchantNo, a.name).toBe('M-B');
    }
  });

  it("a service scoped to b registers b's orders without naming b, and none of a's", async () => {
    const own = await inject('POST', '/api/payins', SHOP, { merchantOrderNo: 'SHOP-1', currency: 'PHP', amount: '5' });
    expect(own.statusCode, own.body).toBe(201);
    expect(own.json()).toMatchObject({ merchant: 'b' });
    const other = await inject('POST', '/api/payins', SHOP, {
      merchant: 'a',
      merchantOrderNo: 'SHOP-2',
      currency: 'PHP',
      amount: '5',
    });
    expect(other.statusCode).toBe(403);
    expect(await lastRow('shop-b')).toMatchObject({ outcome: 'denied', merchantNo: 'M-A', action: 'orders.register' });
  });
});

describe("the dashboard: a's queue for an operator scoped to b", () => {
  const spell = (rest: string) => [
    `/queues${rest}`,
    `/%71ueues${rest}`,
    `/queue%73${rest}`,
    `/queues${rest.replace('/api/queues/c', '/api/queues/%63')}`,
    `/queues${rest.replace('callbacks-a', 'callbacks%2Da')}`,
    `/queues${rest.replace('callbacks-a', 'CALLBACKS-A')}`,
    `/queues${rest}/`,
    `//queues${rest}`,
    `/queues${rest.replace('/api/queues/', '/api//queues/')}`,
  ];

  it("lists b's queue only, and serves no read of a's", async () => {
    const list = await inject('GET', '/queues/api/queues', B_OPERATOR);
    expect(list.statusCode).toBe(200);
    expect(list.json().queues.map((q: { name: string }) => q.name)).toEqual([queues.of('b').queue.name]);
    const admin = await inject('GET', '/queues/api/queues', AUTH);
    expect(
      admin
        .json()
        .queues.map((q: { name: string }) => q.name)
        .sort(),
    ).toEqual([queues.of('a').queue.name, queues.of('b').queue.name].sort());
    for (const url of spell(`/api/queues/${queues.of('a').queue.name}/${failedJob.a}`)) {
      const res = await inject('GET', url, B_OPERATOR);
      expect(res.statusCode, `${url}: ${res.body}`).not.toBe(200);
      expect(res.body).not.toContain('P-a-1');
    }
  });

  it("refuses retry, retry all and promote of a's queue by every spelling, with a denied row naming a", async () => {
    const a = queues.of('a').queue.name;
    for (const rest of [
      `/api/queues/${a}/${failedJob.a}/retry`,
      `/api/queues/${a}/promote`,
      `/api/queues/${a}/retry/failed`,
    ]) {
      for (const url of spell(rest)) {
        const before = await env.db.db.select({ n: sql<number>`count(*)::int` }).from(operatorActions);
        const res = await inject('PUT', url, { ...B_OPERATOR, 'x-reason': 'trying' });
        expect([403, 404], `${url}: ${res.body}`).toContain(res.statusCode);
        if (res.statusCode === 403 && !rest.includes('/retry/failed')) {
          const row = await lastRow('bo@b.example');
          expect(row, url).toMatchObject({ outcome: 'denied', merchantNo: 'M-A' });
          const after = await env.db.db.select({ n: sql<number>`count(*)::int` }).from(operatorActions);
          expect(after[0]!.n, url).toBe(before[0]!.n + 1);
        }
      }
    }
    expect(await queues.of('a').queue.getJobState(failedJob.a)).toBe('failed');
    // The plain spelling of a's retry is the action layer's refusal (403 with its row), not a missing route.
    const plain = await inject('PUT', `/queues/api/queues/${a}/${failedJob.a}/retry`, {
      ...B_OPERATOR,
      'x-reason': 'trying',
    });
    expect(plain.statusCode).toBe(403);
  });
});

describe('reads of an operator scoped to b', () => {
  it('show nothing of a: orders (404 like a missing one), reviews, callbacks, events, audit', async () => {
    const aOrder = await inject('GET', '/api/orders/ORD-a', B_VIEWER);
    const missing = await inject('GET', '/api/orders/NO-SUCH', B_VIEWER);
    expect(aOrder.statusCode).toBe(404);
    expect(aOrder.json().code).toBe(missing.json().code);
    expect(aOrder.json().message.replace('ORD-a', 'X')).toBe(missing.json().message.replace('NO-SUCH', 'X'));
    expect((await inject('GET', '/api/orders/ORD-b', B_VIEWER)).json()).toMatchObject({ merchant: 'b' });
    expect((await inject('GET', '/api/whoami', B_VIEWER)).json()).toMatchObject({ merchants: ['b'] });
    expect((await inject('GET', '/api/whoami', AUTH)).json().merchants).toBeUndefined();

    const rv = (await inject('GET', '/api/reviews?status=open', B_VIEWER)).json();
    expect(rv.reviews.every((r: { merchant: string }) => r.merchant === 'b')).toBe(true);

    const ev = (await inject('GET', '/api/events', B_VIEWER)).json();
    expect(ev.events.map((e: { merchant: string }) => e.merchant)).toEqual(['b']);

    const cb = (await inject('GET', '/api/callbacks?status=failed', B_VIEWER)).json();
    expect(JSON.stringify(cb)).not.toContain('M-A');

    const audit = (await inject('GET', '/api/audit?services=show', B_OPERATOR)).json();
    expect(audit.entries.length).toBeGreaterThan(0);
    expect(audit.entries.every((e: { merchant: string | null }) => e.merchant === 'b' || e.merchant === null)).toBe(
      true,
    );
  });

  it('show nothing of a: replays, search (order and platform numbers), counts, the Callbacks page', async () => {
    const rp = (await inject('GET', '/api/replays', B_VIEWER)).json();
    expect(rp.replays.some((r: { id: number }) => r.id === replayOfA)).toBe(false);
    expect((await inject('GET', `/api/replays/${replayOfA}`, B_VIEWER)).statusCode).toBe(404);
    expect((await inject('GET', `/api/replays/${replayOfA}`, AUTH)).statusCode).toBe(200);

    const page = (url: string, headers: Record<string, string>) =>
      app.inject({ method: 'GET', url, headers: { ...headers, accept: 'text/html' } });
    const adminFinds = await page('/search?q=ORD-a', AUTH);
    expect(adminFinds.statusCode).toBe(303);
    expect(adminFinds.headers.location).toBe('/orders/ORD-a?merchant=a');
    const bFinds = await page('/search?q=ORD-a', B_VIEWER);
    expect(bFinds.statusCode).toBe(200);
    expect(bFinds.body).not.toContain('/orders/ORD-a');
    // A platform number of a's (its review's): the admin gets its story, b nothing.
    expect((await page('/search?q=P-R-a', AUTH)).body).toContain('Callbacks for platform order');
    const bPlatform = (await page('/search?q=P-R-a', B_VIEWER)).body;
    expect(bPlatform).not.toContain('Callbacks for platform order');
    expect(bPlatform).toContain('No order and no callback found');

    const failedCount = (body: string) => Number(/data-count="failed">(\d+)</.exec(body)?.[1]);
    expect(failedCount((await page('/search', AUTH)).body)).toBe(2);
    expect(failedCount((await page('/search', B_VIEWER)).body)).toBe(1);

    const bList = (await page('/callbacks?status=failed', B_VIEWER)).body;
    expect(bList).toContain(`data-job="${failedJob.b}"`);
    expect(bList).not.toContain('ORD-a');
    expect(bList).toContain('<th scope="col">Merchant</th>');
    expect(bList).not.toContain('<option value="a"');
    const adminList = (await page('/callbacks?status=failed', AUTH)).body;
    expect(adminList).toContain('ORD-a');
    expect(adminList).toContain('<option value="a"');
    expect((await page('/callbacks?status=failed&merchant=a', AUTH)).body).not.toContain('ORD-b');
    const outside = await page('/callbacks?status=failed&merchant=a', B_VIEWER);
    expect(outside.statusCode).toBe(400);
    expect(outside.body).not.toContain('ORD-a');
  });

  it("show nothing of a on the merchants page and its API: a's page and history are 404 like an unknown ref", async () => {
    const list = await inject('GET', '/api/merchants', B_VIEWER);
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json<{ merchants: { ref: string }[] }>().merchants.map((m) => m.ref)).toEqual(['b']);
    const own = await inject('GET', '/api/merchants/b/minutes', B_VIEWER);
    expect(own.statusCode, own.body).toBe(200);
    const theirs = await inject('GET', '/api/merchants/a/minutes', B_VIEWER);
    const unknown = await inject('GET', '/api/merchants/zz/minutes', B_VIEWER);
    expect(theirs.statusCode).toBe(404);
    expect(unknown.statusCode).toBe(404);
    const admin = await inject('GET', '/api/merchants', { authorization: `Bearer ${TOKEN}` });
    expect(admin.json<{ merchants: { ref: string }[] }>().merchants.map((m) => m.ref)).toEqual(['a', 'b']);
  });

  it('an admin sees both, with the merchant on each row', async () => {
    // (b's review was dismissed by then: every status.)
    const rv = (await inject('GET', '/api/reviews', AUTH)).json();
    expect(new Set(rv.reviews.map((r: { merchant: string }) => r.merchant))).toEqual(new Set(['a', 'b']));
    const ev = (await inject('GET', '/api/events', AUTH)).json();
    expect(ev.events.map((e: { merchant: string }) => e.merchant).sort()).toEqual(['a', 'b']);
    const audit = (await inject('GET', '/api/audit?services=show&limit=500', AUTH)).json();
    expect(new Set(audit.entries.map((e: { merchant: string | null }) => e.merchant))).toEqual(new Set(['a', 'b']));
  });

  it('?merchant= narrows each list; an unknown ref and one outside the scope are the same 400', async () => {
    for (const list of ['/api/reviews', '/api/events', '/api/audit', '/api/callbacks?status=failed&', '/api/replays']) {
      const url = (ref: string) => `${list}${list.includes('?') ? '' : '?'}merchant=${ref}`;
      const onlyA = await inject('GET', url('a'), AUTH);
      expect(onlyA.statusCode, `${list}: ${onlyA.body}`).toBe(200);
      expect(onlyA.body, list).not.toContain('"merchant":"b"');
      const unknown = await inject('GET', url('zz'), B_VIEWER);
      const outside = await inject('GET', url('a'), B_VIEWER);
      expect([unknown.statusCode, outside.statusCode], list).toEqual([400, 400]);
      expect(outside.json().message.replace('"a"', '"?"'), list).toBe(unknown.json().message.replace('"zz"', '"?"'));
      expect(outside.json().message, list).toContain('merchant');
    }
  });
});

describe('the operators file', () => {
  const merchants = [
    { ref: 'a', merchantNo: 'M-A' },
    { ref: 'b', merchantNo: 'M-B' },
  ];
  const entry = (m: unknown) => ({ name: 'x@y', role: 'operator' as const, merchants: m as string[] });
  it('refuses an unknown ref, an empty list and a duplicate, naming the entry and the field', () => {
    const build = (m: unknown) => () =>
      createOperatorDirectory({ token: TOKEN, operators: [entry(['a']), { ...entry(m), name: 'z@y' }], merchants });
    expect(build(['c'])).toThrow(/CONSOLE_OPERATORS_FILE: \[1\.merchants\] \("z@y"\) unknown merchant "c"/);
    expect(build([])).toThrow(/\[1\.merchants\] \("z@y"\) expected at least one merchant/);
    expect(build(['b', 'b'])).toThrow(/\[1\.merchants\] \("z@y"\) the ref "b" appears twice/);
    const ok = createOperatorDirectory({ token: TOKEN, operators: [entry(['b'])], merchants });
    expect(ok.byName('x@y')?.scope?.refs).toEqual(['b']);
    expect(ok.byName('admin')?.scope).toBeUndefined();
  });
});
