import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { callbackArrivals, operatorActions, replays } from '@mcb/core/db';
import { createOrder, payinEvent, payoutEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, desc, eq, inArray } from 'drizzle-orm';
import { OPERATORS, TOKENS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { run as replayCli } from '../../apps/console/src/cli/commands/replay.ts';
import { run as reviewsCli } from '../../apps/console/src/cli/commands/reviews.ts';
import { ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
const started = new Date().toISOString();

beforeAll(async () => {
  // A backoff of about 10 minutes (full jitter on a huge base is almost always the cap): a job that failed once
  // stays "retrying" until someone runs it now.
  stack = await startOpsStack(env, {
    worker: { backoff: { baseMs: 1e9, capMs: 600_000 } },
    listen: true,
    consoleDeps: { operators: OPERATORS },
  });
});
afterAll(async () => {
  await stack?.close();
});

const page = (role: keyof typeof TOKENS, url: string) =>
  stack.app.inject({ method: 'GET', url, headers: { ...bearer(role), accept: 'text/html' } });
const api = (role: keyof typeof TOKENS, method: 'GET' | 'POST', url: string, payload?: unknown) =>
  stack.app.inject({
    method,
    url,
    headers: bearer(role),
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
const post = (role: keyof typeof TOKENS, url: string, form: [string, string][]) =>
  stack.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(role), accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  });

const statusOf = async (jobId: string) =>
  (await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, jobId)))[0]?.status;

interface Made {
  merchantOrderNo: string;
  orderNo: string;
  jobId: string;
}

/** A callback whose only attempt fails with the given failure, then the platform is fixed. */
async function failed(
  kind: 'payin' | 'payout',
  amount: string,
  currency: string,
  failure: 'http' | 'timeout',
): Promise<Made> {
  const no = uid();
  const o = { merchantOrderNo: `MO-CB-${no}`, orderNo: `P-CB-${no}` };
  await createOrder(env.db.db, { ...o, kind, amount, currency });
  const release = failure === 'timeout' ? stack.platform.hold((n) => n === o.merchantOrderNo) : undefined;
  if (failure === 'http') stack.platform.failNext(o.merchantOrderNo, 1, 500);
  const jobId = await stack.add(
    kind === 'payin' ? payinEvent({ ...o, fiatAmount: amount }) : payoutEvent({ ...o, state: 4 }),
    1,
  );
  await waitFor(async () => (await statusOf(jobId)) === 'failed', {
    timeoutMs: 15_000,
    message: `${jobId} did not fail`,
  });
  release?.();
  stack.platform.setOrder(
    platformOrder({ ...o, type: kind, state: kind === 'payin' ? 6 : 4, amountJson: amount, currency }),
  );
  return { ...o, jobId };
}

let outage: Made[] = [];
let dryRunLink = '';
const CODES = ['PLATFORM_HTTP_ERROR', 'PLATFORM_TIMEOUT'];

describe('the Callbacks page and replays that say what they will do', () => {
  it('lists failed jobs of two codes at once; the landing page counts them and links to the list; the dry-run link carries both codes', async () => {
    outage = [
      await failed('payin', '100.10', 'INR', 'http'),
      await failed('payin', '200.20', 'INR', 'http'),
      await failed('payin', '300.30', 'INR', 'http'),
      await failed('payout', '70', 'PHP', 'http'),
      await failed('payin', '5.5', 'USD', 'timeout'),
    ];
    const codes = (
      await env.db.db
        .select()
        .from(callbackArrivals)
        .where(
          inArray(
            callbackArrivals.jobId,
            outage.map((o) => o.jobId),
          ),
        )
    )
      .map((a) => a.lastCode)
      .sort();
    expect(codes).toEqual([
      'PLATFORM_HTTP_ERROR',
      'PLATFORM_HTTP_ERROR',
      'PLATFORM_HTTP_ERROR',
      'PLATFORM_HTTP_ERROR',
      'PLATFORM_TIMEOUT',
    ]);

    // The API takes several codes (repeated), the CLI's comma list becomes that.
    const q = `status=failed&code=${CODES.join('&code=')}&from=${encodeURIComponent(started)}`;
    const both = await api('viewer', 'GET', `/api/callbacks?${q}`);
    expect(both.statusCode, both.body).toBe(200);
    expect((both.json() as { callbacks: { jobId: string }[] }).callbacks.map((c) => c.jobId).sort()).toEqual(
      outage.map((o) => o.jobId).sort(),
    );
    const one = await api(
      'viewer',
      'GET',
      `/api/callbacks?status=failed&code=PLATFORM_HTTP_ERROR&from=${encodeURIComponent(started)}`,
    );
    expect((one.json() as { callbacks: unknown[] }).callbacks).toHaveLength(4);

    // The landing page: counts, each a link to its list.
    const landing = await page('viewer', '/search');
    expect(landing.body).toContain(
      '<a href="/callbacks?status=failed"><strong data-count="failed">5</strong> failed</a>',
    );
    expect(landing.body).toContain(
      '<a href="/callbacks?status=retrying"><strong data-count="retrying">0</strong> retrying</a>',
    );
    expect(landing.body).not.toContain('Failed list');

    // The Failed preset lists them and offers both codes; choosing both (any case) keeps all five.
    const failedList = await page('operator', '/callbacks?status=failed');
    expect(failedList.statusCode).toBe(200);
    for (const o of outage) expect(failedList.body).toContain(`href="/orders/${o.merchantOrderNo}"`);
    expect(failedList.body).toContain('<h2 id="list-h">5 callback(s) match</h2>');
    expect(failedList.body).toMatch(
      /value="PLATFORM_HTTP_ERROR"> <code>PLATFORM_HTTP_ERROR<\/code> <span class="muted">4<\/span>/,
    );
    expect(failedList.body).toMatch(
      /value="PLATFORM_TIMEOUT"> <code>PLATFORM_TIMEOUT<\/code> <span class="muted">1<\/span>/,
    );
    const chosen = await page('operator', '/callbacks?status=failed&code=platform_http_error&code=PLATFORM_TIMEOUT');
    expect(chosen.body).toContain('5 callback(s) match');
    const dryRunHref = /href="(\/replays\/new\?[^"]+)">Dry run a replay of these 5 failed job\(s\)/
      .exec(chosen.body)?.[1]
      ?.replaceAll('&amp;', '&');
    expect(dryRunHref).toBe('/replays/new?status=failed&code=PLATFORM_HTTP_ERROR&code=PLATFORM_TIMEOUT&dryRun=1');

    dryRunLink = dryRunHref!;

    // The order page of a failed callback names the platform order its callback named (nothing applied yet).
    const order = await page('viewer', `/orders/${outage[0]!.merchantOrderNo}`);
    expect(order.body).toContain(
      `${outage[0]!.orderNo} <span class="muted">(named by its callbacks; none applied yet)</span>`,
    );
    expect(order.body).not.toContain('not known yet');
    expect(order.body).toContain('Nothing posted: not credited yet.');
    // A viewer sees the list but no way to replay.
    const viewerList = await page('viewer', '/callbacks?status=failed');
    expect(viewerList.body).not.toContain('/replays/new?');
    expect(viewerList.body).toContain('Replaying needs the role operator');
  }, 60_000);

  it('while the platform still fails, the dry run says jobs of one attempt fail again at once, not into review', async () => {
    stack.platform.setOutage(503);
    try {
      const res = await api('operator', 'POST', '/api/replays', {
        filter: { code: CODES, from: started },
        dryRun: true,
      });
      expect(res.statusCode, res.body).toBe(200);
      const plan = (
        res.json() as {
          plan: {
            counts: Record<string, number>;
            totals: { cls: string; orders: number; amount: string; currency: string }[];
          };
        }
      ).plan;
      // These jobs have one attempt (CALLBACK_JOB_ATTEMPTS=1): a replay's only attempt is its last, so the worker
      // fails them again at once while Get order answers 503 (issue 48), and the dry run says so.
      expect(plan.counts).toMatchObject({ willFailAgain: 5, stillPending: 0, willApply: 0, willReview: 0 });
      // Money stays exact text, summed per currency.
      expect(plan.totals.filter((t) => t.cls === 'willFailAgain').map((t) => [t.currency, t.orders, t.amount])).toEqual(
        [
          ['INR', 3, '600.6'],
          ['USD', 1, '5.5'],
          ['PHP', 1, '70'],
        ],
      );
      const html = await page(
        'operator',
        `/replays/new?code=${CODES.join(',')}&from=${encodeURIComponent(started)}&dryRun=1`,
      );
      expect(html.body).toContain(
        'Will credit 0 orders; finalise 0 payouts; 0 into review; 0 back to retrying with a fresh budget; 5 fail again at once.',
      );
      expect(html.body).toContain('replaying fails it again at once');
      expect(html.body).not.toContain('ends in review');
    } finally {
      stack.platform.setOutage(undefined);
    }
  });

  it("the dry run from the list's link totals the money by currency; a replay then shows what became of its jobs and how much; the replays page, its JSON and `pnpm cli replay list` agree", async () => {
    // The dry run, from that link: all five, and the money by currency.
    const plan = await page('operator', dryRunLink);
    expect(plan.statusCode, plan.body).toBe(200);
    expect(plan.body).toContain('Dry run: 5 failed job(s) match');
    expect(plan.body).toContain(
      'Will credit 4 orders, 600.60 INR + 5.50 USD; finalise 1 payout (1 succeeded, 70.00 PHP; 0 refused); 0 into review; 0 back to retrying with a fresh budget.',
    );
    expect(plan.body).toContain('value="PLATFORM_HTTP_ERROR, PLATFORM_TIMEOUT"');
    const res = await api('operator', 'POST', '/api/replays', {
      filter: { status: ['failed'], code: CODES, from: started },
      reason: 'platform back after the outage',
      ratePerSecond: 50,
    });
    expect(res.statusCode, res.body).toBe(202);
    const id = (res.json() as { replay: { id: number } }).replay.id;
    for (const o of outage)
      await waitFor(async () => ['applied'].includes((await statusOf(o.jobId)) ?? ''), {
        timeoutMs: 20_000,
        message: `${o.jobId} not applied`,
      });
    for (const o of outage.filter((_, i) => i !== 3))
      expect((await ledgerOf(env.db.db, o.merchantOrderNo)).ledger).toHaveLength(1);
    // The driver marks the replay finished after its last job was sent back, which can be after that job ran.
    let replay: { status: string; outcomes: unknown[] } = { status: '', outcomes: [] };
    await waitFor(
      async () => {
        const view = await api('viewer', 'GET', `/api/replays/${id}`);
        replay = (view.json() as { replay: typeof replay }).replay;
        return replay.status === 'finished';
      },
      { timeoutMs: 10_000, message: `replay ${id} not finished` },
    );
    expect(replay.outcomes).toEqual([
      { outcome: 'credited', jobs: 3, currency: 'INR', amount: '600.6' },
      { outcome: 'credited', jobs: 1, currency: 'USD', amount: '5.5' },
      { outcome: 'finalised', jobs: 1, currency: 'PHP', amount: '70' },
    ]);
    const list = await page('viewer', '/replays');
    expect(list.body).toContain('<h1>Replays</h1>');
    expect(list.body).toContain('<strong>3</strong> credited, 600.60 INR');
    expect(list.body).toContain('<strong>1</strong> payout finalised, 70.00 PHP');
    expect(list.body).not.toMatch(/\d{4}-\d\d-\d\dT\d\d:\d\d/); // human times, not ISO
    const progress = await page('viewer', `/replays/${id}`);
    expect(progress.body).toContain(`<h1>Replay ${id}</h1>`);
    expect(progress.body).toContain('<strong>1</strong> credited, 5.50 USD');

    // The CLI prints the same list in the same words.
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void lines.push(a.join(' ')));
    try {
      expect(await replayCli(['list'], { CONSOLE_URL: stack.url, CONSOLE_OPERATOR_TOKEN: TOKENS.viewer })).toBe(0);
    } finally {
      spy.mockRestore();
    }
    const row = lines
      .join('\n')
      .split('\n')
      .find((l) => l.startsWith(String(id)));
    expect(row).toMatch(
      /finished\s+5 \/ 5\s+3 credited, 600\.60 INR; 1 credited, 5\.50 USD; 1 payout finalised, 70\.00 PHP\s+otto\.operator@example\.com\s+platform back after the outage/,
    );

    // The order page still shows the failure the replay repaired, and its platform order.
    const order = await page('viewer', `/orders/${outage[0]!.merchantOrderNo}`);
    expect(order.body).toContain('attempt failed');
    expect(order.body).toContain('PLATFORM_HTTP_ERROR');
    const payout = await page('viewer', `/orders/${outage[3]!.merchantOrderNo}`);
    expect(payout.body).toContain('Nothing posted: the payout succeeded');
    expect(payout.body).not.toContain('not finalised');
  }, 60_000);

  it('"run now" promotes jobs waiting out their backoff: operator role, a reason, an audit row', async () => {
    const made: Made[] = [];
    for (const amount of ['11.00', '12.00']) {
      const no = uid();
      const o = { merchantOrderNo: `MO-RN-${no}`, orderNo: `P-RN-${no}` };
      await createOrder(env.db.db, { ...o, kind: 'payin', amount, currency: 'INR' });
      stack.platform.failNext(o.merchantOrderNo, 1, 500);
      stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: amount, currency: 'INR' }));
      made.push({ ...o, jobId: await stack.add(payinEvent({ ...o, fiatAmount: amount }), 5) });
    }
    for (const o of made) await waitFor(async () => (await statusOf(o.jobId)) === 'retrying', { timeoutMs: 15_000 });
    for (const o of made) expect(await (await stack.queue.getJob(o.jobId))!.isDelayed()).toBe(true);

    const list = await page('operator', '/callbacks?status=retrying');
    expect(list.body).toContain('<form class="card" method="post" action="/callbacks/run-now"');
    expect(list.body).toContain('Run 2 job(s) now');
    expect((await page('viewer', '/callbacks?status=retrying')).body).not.toContain('action="/callbacks/run-now"');

    const form: [string, string][] = [
      ['status', 'retrying'],
      ['back', '/callbacks?status=retrying'],
    ];
    const denied = await post('viewer', '/callbacks/run-now', [...form, ['reason', 'try']]);
    expect(denied.statusCode).toBe(403);
    expect(denied.body).not.toContain('queue.promote'); // a page names the role, not the internal action
    expect(denied.body).toContain('This needs the role operator');
    const noReason = await post('operator', '/callbacks/run-now', [...form, ['reason', ' ']]);
    expect(decodeURIComponent(String(noReason.headers.location))).toMatch(/error=a\+reason\+is\+required/);
    const wrongStatus = await post('operator', '/callbacks/run-now', [
      ['status', 'failed'],
      ['reason', 'x'],
    ]);
    expect(decodeURIComponent(String(wrongStatus.headers.location)).replaceAll('+', ' ')).toMatch(
      /status must be retrying or waiting \(got failed\)/,
    );
    for (const o of made) expect(await (await stack.queue.getJob(o.jobId))!.isDelayed()).toBe(true);

    const ran = await post('operator', '/callbacks/run-now', [...form, ['reason', 'platform is back']]);
    expect(ran.statusCode).toBe(303);
    expect(decodeURIComponent(String(ran.headers.location)).replaceAll('+', ' ')).toContain('ok=2 job(s) run now.');
    for (const o of made)
      await waitFor(async () => (await ledgerOf(env.db.db, o.merchantOrderNo)).order.status === 'credited', {
        timeoutMs: 15_000,
      });
    const [audit] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.action, 'queue.promote'))
      .orderBy(desc(operatorActions.id))
      .limit(1);
    expect(audit).toMatchObject({
      operator: 'otto.operator@example.com',
      reason: 'platform is back',
      outcome: 'promoted',
      target: 'callbacks:status=retrying',
    });
    expect(audit!.details).toMatchObject({ promoted: 2 });
    const denials = await env.db.db
      .select()
      .from(operatorActions)
      .where(and(eq(operatorActions.action, 'queue.promote'), eq(operatorActions.outcome, 'denied')));
    expect(denials.map((d) => d.operator)).toEqual(['vera.viewer@example.com']);
  }, 60_000);

  it('pages through a long list, newest first, with times typed without a zone read as UTC', async () => {
    const base = Date.parse('1999-03-01T00:00:00Z');
    await env.db.db.insert(callbackArrivals).values(
      Array.from({ length: 60 }, (_, i) => {
        const at = new Date(base + i * 60_000);
        return {
          jobId: `payin-P-OLD-${i}-6`,
          kind: 'payin' as const,
          orderNo: `P-OLD-${i}`,
          state: 6,
          merchantOrderNo: `MO-OLD-${i}`,
          amount: '1.00',
          receivedAt: at,
          firstSeenAt: at,
          updatedAt: at,
          attempts: 1,
          status: 'applied' as const,
          outcome: 'credited',
        };
      }),
    );
    const first = await page('viewer', '/callbacks?from=1999-03-01+00:00&to=1999-03-02+00:00');
    expect(first.body).toContain('60 callback(s) match');
    const rows = (body: string) => [...body.matchAll(/data-job="payin-P-OLD-(\d+)-6"/g)].map((m) => Number(m[1]));
    expect(rows(first.body)).toEqual(Array.from({ length: 50 }, (_, i) => 59 - i));
    const older = /href="(\/callbacks\?[^"]+)">Older callbacks/.exec(first.body)?.[1]?.replaceAll('&amp;', '&');
    expect(older).toMatch(/from=1999-03-01T00%3A00%3A00Z&to=1999-03-02T00%3A00%3A00Z&cursor=/);
    const second = await page('viewer', older!);
    expect(rows(second.body)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    expect(second.body).not.toContain('Older callbacks');
    // A bad value is said on the page, in words, with the form kept.
    const bad = await page('viewer', '/callbacks?amountMin=ten&merchantOrderNo=MO-1');
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('amountMin: expected a decimal string');
    expect(bad.body).toContain('value="MO-1"');
  });

  it('`pnpm cli reviews list` lists open reviews by default, every status with --all', async () => {
    const calls: string[] = [];
    const spy = vi.spyOn(globalThis, 'fetch');
    const quiet = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const usage = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const cliEnv = { CONSOLE_URL: stack.url, CONSOLE_OPERATOR_TOKEN: TOKENS.viewer };
      expect(await reviewsCli(['list'], cliEnv)).toBe(0);
      expect(await reviewsCli(['list', '--all'], cliEnv)).toBe(0);
      expect(await reviewsCli(['list', '--all', '--status', 'open'], cliEnv)).toBe(2);
      calls.push(...spy.mock.calls.map((c) => String(c[0])));
    } finally {
      spy.mockRestore();
      quiet.mockRestore();
      usage.mockRestore();
    }
    expect(calls.map((u) => u.replace(stack.url!, ''))).toEqual(['/api/reviews?status=open', '/api/reviews']);
    expect(await env.db.db.select().from(replays)).toHaveLength(1);
  });
});
