import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, replays } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq } from 'drizzle-orm';
import { OPERATORS, bearer, type TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;

beforeAll(async () => {
  // No driver: a started replay stays "running" here, so its page shows the cancel control.
  stack = await startOpsStack(env, { worker: true, consoleDeps: { operators: OPERATORS, replayDriver: false } });
});
afterAll(async () => {
  await stack?.close();
});

const page = (role: keyof typeof TOKENS, url: string) =>
  stack.app.inject({ method: 'GET', url, headers: { ...bearer(role), accept: 'text/html' } });
const post = (role: keyof typeof TOKENS, url: string, form: Record<string, string>) =>
  stack.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(role), accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  });

/** A failed job whose merchant order number carries markup (visible ASCII is a valid order number). */
async function failedPayin() {
  const no = uid();
  const o = { merchantOrderNo: `<b>"MO-${no}`, orderNo: `P-W-${no}` };
  await createOrder(env.db.db, { ...o, kind: 'payin', amount: '8.00' });
  stack.platform.failNext(o.merchantOrderNo, 1, 500);
  const jobId = await stack.add(payinEvent({ ...o, fiatAmount: '8.00' }), 1);
  await waitFor(
    async () =>
      (
        await env.db.db
          .select()
          .from(callbackArrivals)
          .where(and(eq(callbackArrivals.jobId, jobId), eq(callbackArrivals.status, 'failed')))
      )[0],
  );
  stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '8.00' }));
  return o;
}

describe('the replay wizard pages', () => {
  it('shows an operator the dry run and the start form, escaped; a viewer neither', async () => {
    const o = await failedPayin();
    const url = `/replays/new?dryRun=1&merchantOrderNo=${encodeURIComponent(o.merchantOrderNo)}`;
    const res = await page('operator', url);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toMatch(/Dry run: 1 failed job\(s\) match/);
    expect(res.body).toMatch(/<td class="num" data-class="willApply">1<\/td>/);
    expect(res.body).toContain('&lt;b&gt;&quot;MO-');
    expect(res.body).not.toContain('<b>"MO-');
    expect(res.body).toContain('<form class="card" method="post" action="/replays"');
    expect(res.body).toContain('name="reason" required');

    const viewer = await page('viewer', url);
    expect(viewer.statusCode).toBe(403);
    expect(viewer.body).not.toContain('action="/replays"');
    const form = await page('viewer', '/replays/new');
    expect(form.statusCode).toBe(403);
    expect(form.body).toContain('needs the role operator');
    const list = await page('viewer', '/replays');
    expect(list.statusCode).toBe(200);
    expect(list.body).not.toContain('/replays/new');
    expect((await page('operator', '/replays')).body).toContain('href="/replays/new"');
  });

  it('refuses a start without a reason on the same page, starts with one, and offers cancel to its operator only', async () => {
    const o = await failedPayin();
    const noReason = await post('operator', '/replays', {
      merchantOrderNo: o.merchantOrderNo,
      ratePerSecond: '5',
      reason: ' ',
    });
    expect(noReason.statusCode).toBe(303);
    expect(noReason.headers.location).toMatch(/^\/replays\/new\?.*dryRun=1.*&error=a\+reason\+is\+required/);
    expect(await env.db.db.select().from(replays)).toEqual([]);
    const badRate = await post('operator', '/replays', {
      merchantOrderNo: o.merchantOrderNo,
      ratePerSecond: '1000',
      reason: 'x',
    });
    expect(decodeURIComponent(String(badRate.headers.location))).toMatch(/error=ratePerSecond\+1000\+is\+above/);

    const started = await post('operator', '/replays', {
      merchantOrderNo: o.merchantOrderNo,
      ratePerSecond: '5',
      reason: 'customer <i>paid</i>',
    });
    expect(started.statusCode, started.body).toBe(303);
    const location = String(started.headers.location);
    const id = /^\/replays\/(\d+)\?ok=/.exec(location)?.[1];
    expect(id, location).toBeDefined();
    const progress = await page('operator', location);
    expect(progress.body).toContain('data-status="running"');
    expect(progress.body).toContain('customer &lt;i&gt;paid&lt;/i&gt;');
    // Only the counters refresh (a script polls the JSON API); the page itself never reloads.
    expect(progress.body).not.toContain('http-equiv="refresh"');
    expect(progress.body).toContain(`data-replay-id="${id}"`);
    expect(progress.body).toContain('<script src="/assets/replay-progress.js" defer></script>');
    expect(progress.body).toContain(`action="/replays/${id}/cancel"`);
    // Another operator's replay: only an admin may cancel it; a viewer sees no control.
    expect((await page('viewer', `/replays/${id}`)).body).not.toContain('/cancel"');
    expect((await page('admin', `/replays/${id}`)).body).toContain(`action="/replays/${id}/cancel"`);

    const noCancelReason = await post('operator', `/replays/${id}/cancel`, { reason: '' });
    expect(noCancelReason.headers.location).toMatch(/error=a\+reason\+is\+required/);
    const cancelled = await post('operator', `/replays/${id}/cancel`, { reason: 'wrong order' });
    expect(cancelled.headers.location).toMatch(new RegExp(`^/replays/${id}\\?ok=replay\\+${id}\\+cancelled`));
    const after = await page('operator', `/replays/${id}`);
    expect(after.body).toContain('data-status="cancelled"');
    expect(after.body).not.toContain('replay-progress.js');
    // A cancelled replay offers the rest: a dry run of the same filter, which links back to it.
    expect(after.body).toContain('Replay the rest');
    const rest = `/replays/new?merchantOrderNo=${encodeURIComponent(o.merchantOrderNo)}&dryRun=1&rest=${id}`;
    expect(after.body).toContain(`href="${rest.replaceAll('&', '&amp;')}"`);
    // Who cancelled it and why, for everyone who may read the replay (a viewer cannot read the audit).
    for (const role of ['operator', 'viewer'] as const) {
      const seen = await page(role, `/replays/${id}`);
      expect(seen.body).toMatch(/<dd data-ended-by>otto\.operator@example\.com<\/dd>/);
      expect(seen.body).toContain('<dd data-end-reason>wrong order</dd>');
      expect((await page(role, '/replays')).body).toContain('otto.operator@example.com: wrong order');
    }
    // "Dry run the rest" names the replay it continues and keeps its reason.
    const next = await page('operator', rest);
    expect(next.body).toContain(`<p data-rest-of="${id}">The rest of <a href="/replays/${id}">replay ${id}</a>`);
    expect(next.body).toContain('cancelled by otto.operator@example.com: wrong order');
    expect(next.body).toContain(`customer &lt;i&gt;paid&lt;/i&gt; (the rest of replay ${id})</textarea>`);
  });
});
