import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantPauses, operatorActions, replays, reviews } from '@mcb/core/db';
import { createOrder, MERCHANT_NO, payinEvent, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { count, eq } from 'drizzle-orm';
import { bearer, OPERATORS, type TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { routesOf } from '../../apps/console/src/operators/service-gate.ts';
import { ACTIONS, CHANGES_NOTHING, type Action } from '../../apps/console/src/operators/roles.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// The pages' route table (web/page-route.ts): every form post is a row whose action the one role hook checks, and
// whose action asks for a reason. The API's rows have their own test (every-action-needs-a-reason-...).

const env = useTestEnv();
let stack: OpsStack;
let reviewId: number;
let failedOrderNo: string;
let failedJobId: string;
let replayId: number;

beforeAll(async () => {
  // No replay driver: the replay started below stays running, so cancelling it would change something.
  stack = await startOpsStack(env, { worker: true, consoleDeps: { operators: OPERATORS, replayDriver: false } });
  const [review] = await env.db.db
    .insert(reviews)
    .values({
      kind: 'payin',
      orderNo: 'P-PAGE-1',
      state: 6,
      merchantOrderNo: 'MO-PAGE-1',
      reasonCode: 'VERIFY_AMOUNT_MISMATCH',
      reason: 'amount differs',
      event: { orderNo: 'P-PAGE-1', merchantOrderNo: 'MO-PAGE-1', fiatAmount: '1.00' },
    })
    .returning();
  reviewId = review!.id;
  // A job failed for good (Get order keeps failing, one attempt): what "Replay this job" sends back.
  const no = uid();
  failedOrderNo = `MO-${no}`;
  await createOrder(env.db.db, { merchantOrderNo: failedOrderNo, kind: 'payin', amount: '5.00' });
  stack.platform.failNext(failedOrderNo, 1_000, 500);
  failedJobId = await stack.add(
    payinEvent({ orderNo: `P-${no}`, merchantOrderNo: failedOrderNo, fiatAmount: '5.00' }),
    1,
  );
  await waitFor(async () => (await stack.queue.getJobState(failedJobId)) === 'failed', { message: 'job did not fail' });
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
});

/** Every form post of the pages, by its row's path, with a form that is valid apart from the reason. */
const PAGE_FORMS = (): Record<string, { url: string; form: Record<string, string> }> => ({
  'POST /reviews/:id/reverify': { url: `/reviews/${reviewId}/reverify`, form: { back: '/reviews' } },
  'POST /reviews/:id/dismiss': { url: `/reviews/${reviewId}/dismiss`, form: { back: '/reviews' } },
  'POST /orders/:merchantOrderNo/jobs/:jobId/replay': {
    url: `/orders/${failedOrderNo}/jobs/${failedJobId}/replay`,
    form: {},
  },
  'POST /callbacks/run-now': { url: '/callbacks/run-now', form: { status: 'retrying', back: '/callbacks' } },
  'POST /replays': { url: '/replays', form: { status: 'failed', merchantOrderNo: failedOrderNo, ratePerSecond: '5' } },
  'POST /replays/:id/cancel': { url: `/replays/${replayId}/cancel`, form: {} },
  'POST /merchants/:ref/pause': { url: '/merchants/default/pause', form: {} },
  'POST /merchants/:ref/resume': { url: '/merchants/default/resume', form: {} },
});

const post = (role: keyof typeof TOKENS, url: string, form: Record<string, string>) =>
  stack.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(role), accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  });

/** What any of the posts would change: the review, the failed job, the replays, the queue's waiting jobs. */
async function unchanged() {
  const [review] = await env.db.db.select().from(reviews).where(eq(reviews.id, reviewId));
  const [replay] = await env.db.db.select().from(replays).where(eq(replays.id, replayId));
  return {
    review: review!.status,
    failed: await stack.queue.getJobState(failedJobId),
    replay: replay!.status,
    replays: (await env.db.db.select({ n: count() }).from(replays))[0]!.n,
    waiting: await stack.queue.getWaitingCount(),
    paused: await env.db.db.select().from(merchantPauses),
  };
}
const auditRows = async () => (await env.db.db.select({ n: count() }).from(operatorActions))[0]!.n;
/** A flash line of a redirect back to the page, as the page shows it. */
const flash = (location: unknown) => decodeURIComponent(String(location)).replaceAll('+', ' ');

describe("the pages' route table", () => {
  it('lists every form post of the pages as a row naming an action of the role table, and each in PAGE_FORMS', () => {
    const routes = routesOf(stack.app);
    const rows = routes.filter((r) => r.pageAction !== undefined);
    expect(rows.map((r) => `${r.method} ${r.url}`)).toEqual(
      expect.arrayContaining(['GET /search', 'GET /reviews', 'GET /replays/new', 'POST /reviews/:id/reverify']),
    );
    for (const r of rows) expect(Object.keys(ACTIONS)).toContain(r.pageAction);
    const posts = rows.filter((r) => r.method !== 'GET' && r.method !== 'HEAD');
    expect(posts.map((r) => `${r.method} ${r.url}`).sort()).toEqual(Object.keys(PAGE_FORMS()).sort());
    // A page shows what it reads; a post changes something, so its action is one a role is accountable for.
    for (const r of rows.filter((x) => x.method === 'GET')) expect(CHANGES_NOTHING).toContain(r.pageAction);
    for (const r of posts) expect(CHANGES_NOTHING.has(r.pageAction as Action), r.url).toBe(false);
    // No page posts outside the table: every other state-changing route is the API's, bull-board's or the session's.
    const others = routes.filter(
      (r) => r.pageAction === undefined && r.action === undefined && !['GET', 'HEAD'].includes(r.method),
    );
    for (const r of others) expect(r.url, `${r.method} ${r.url}`).toMatch(/^\/(queues\/|api\/|login$|logout$)/);
  });

  it('refuses each post for a viewer (403 naming the role operator) before it runs, records it as denied, and changes nothing', async () => {
    const before = await unchanged();
    const rowsBefore = await auditRows();
    const forms = Object.values(PAGE_FORMS());
    for (const { url, form } of forms) {
      const res = await post('viewer', url, { ...form, reason: 'I am only looking' });
      expect(res.statusCode, url).toBe(403);
      expect(res.headers['content-type'], url).toMatch(/^text\/html/);
      expect(res.body, url).toContain('This needs the role operator; you are signed in as viewer.');
    }
    expect(await unchanged()).toEqual(before);
    expect(await auditRows()).toBe(rowsBefore + forms.length);
    const denied = await env.db.db.select().from(operatorActions).where(eq(operatorActions.outcome, 'denied'));
    expect(denied).toHaveLength(forms.length);
    for (const d of denied)
      expect(d).toMatchObject({ operator: 'vera.viewer@example.com', role: 'viewer', reason: 'I am only looking' });
    expect(denied.map((d) => d.target)).toEqual(
      expect.arrayContaining([
        `review:${reviewId}`,
        `job:callbacks/${failedJobId}`,
        `replay:${replayId}`,
        'merchant:default',
      ]),
    );
    // A refused pause or resume names its merchant's number in the audit row.
    for (const d of denied.filter((x) => x.target === 'merchant:default')) expect(d.merchantNo).toBe(MERCHANT_NO);
    // The role hook decides before the form is read: a viewer's invalid form is refused, not sent back to be fixed.
    const invalid = await post('viewer', '/callbacks/run-now', { from: 'yesterday', reason: 'r' });
    expect(invalid.statusCode).toBe(403);
    expect(await unchanged()).toEqual(before);
  });

  it('sends each post without a reason back to its page saying a reason is required, and changes nothing', async () => {
    const before = await unchanged();
    const rowsBefore = await auditRows();
    for (const { url, form } of Object.values(PAGE_FORMS())) {
      for (const reason of [undefined, '   ', '\u200b']) {
        const res = await post('operator', url, reason === undefined ? form : { ...form, reason });
        expect(res.statusCode, url).toBe(303);
        expect(flash(res.headers.location), url).toMatch(/[?&]error=a reason is required/);
      }
    }
    expect(await unchanged()).toEqual(before);
    expect(await auditRows()).toBe(rowsBefore);
  });

  it('sends a form its schema refuses back to its page naming the field, and changes nothing', async () => {
    const before = await unchanged();
    const rowsBefore = await auditRows();
    const invalid: [string, Record<string, string>, RegExp][] = [
      [
        '/replays',
        { status: 'failed', ratePerSecond: 'fast', reason: 'r' },
        /error=the form is not valid: ratePerSecond/,
      ],
      ['/replays', { amountMin: 'ten', reason: 'r' }, /error=the form is not valid: filter\.amountMin/],
      ['/callbacks/run-now', { from: 'yesterday', reason: 'r' }, /error=the form is not valid: filter\.from/],
    ];
    for (const [url, form, expected] of invalid) {
      const res = await post('operator', url, form);
      expect(res.statusCode, url).toBe(303);
      expect(flash(res.headers.location), url).toMatch(expected);
    }
    // A path parameter the row's schema refuses is a 400 page.
    const badId = await post('operator', '/reviews/not-a-number/dismiss', { reason: 'r' });
    expect(badId.statusCode).toBe(400);
    expect(await unchanged()).toEqual(before);
    expect(await auditRows()).toBe(rowsBefore);
  });
});

describe("the merchant page's pause and resume forms", () => {
  const page = async (location: unknown) =>
    (
      await stack.app.inject({
        method: 'GET',
        url: String(location),
        headers: { ...bearer('operator'), accept: 'text/html' },
      })
    ).body;

  it('offer the pause form to an operator, none to a viewer; pause and resume go back to the page saying what was done, a second pause or resume says why not, and each is audited with the merchant', async () => {
    expect(await page('/merchants/default')).toContain('action="/merchants/default/pause"');
    const asViewer = await stack.app.inject({
      method: 'GET',
      url: '/merchants/default',
      headers: { ...bearer('viewer'), accept: 'text/html' },
    });
    expect(asViewer.body).not.toContain('<form class="inline pause-control"');

    const paused = await post('operator', '/merchants/default/pause', { reason: 'platform incident' });
    expect([paused.statusCode, flash(paused.headers.location)]).toEqual([
      303,
      expect.stringMatching(/^\/merchants\/default\?ok=Merchant default paused/),
    ]);
    expect(await env.db.db.select().from(merchantPauses)).toEqual([
      expect.objectContaining({
        merchantNo: MERCHANT_NO,
        pausedBy: 'otto.operator@example.com',
        reason: 'platform incident',
      }),
    ]);
    const shown = await page(paused.headers.location);
    expect(shown).toContain('action="/merchants/default/resume"');
    expect(shown).not.toContain('action="/merchants/default/pause"');

    const again = await post('operator', '/merchants/default/pause', { reason: 'twice' });
    expect([again.statusCode, flash(again.headers.location)]).toEqual([
      303,
      expect.stringMatching(/error=merchant "default" is already paused by otto\.operator@example\.com/),
    ]);
    expect(await env.db.db.select().from(merchantPauses)).toEqual([
      expect.objectContaining({ reason: 'platform incident' }),
    ]);

    const resumed = await post('operator', '/merchants/default/resume', { reason: 'platform fixed' });
    expect(flash(resumed.headers.location)).toMatch(/^\/merchants\/default\?ok=Merchant default resumed/);
    expect(await env.db.db.select().from(merchantPauses)).toEqual([]);
    const notPaused = await post('operator', '/merchants/default/resume', { reason: 'twice' });
    expect(flash(notPaused.headers.location)).toMatch(/error=merchant "default" is not paused/);

    // An unknown merchant goes back to the list saying so; nothing is paused.
    const unknown = await post('operator', '/merchants/nosuch/pause', { reason: 'typo' });
    expect([unknown.statusCode, flash(unknown.headers.location)]).toEqual([
      303,
      expect.stringMatching(/^\/merchants\?error=no merchant "nosuch"/),
    ]);
    expect(await env.db.db.select().from(merchantPauses)).toEqual([]);

    const audited = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.target, 'merchant:default'));
    expect(audited.filter((a) => a.outcome !== 'denied').map((a) => [a.action, a.outcome, a.merchantNo])).toEqual(
      expect.arrayContaining([
        ['merchants.pause', 'paused', MERCHANT_NO],
        ['merchants.resume', 'resumed', MERCHANT_NO],
      ]),
    );
  });
});
