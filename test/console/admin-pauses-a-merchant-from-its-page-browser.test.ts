import path from 'node:path';
import { ledgerEntries, merchantPauses, operatorActions, orders } from '@mcb/core/db';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq, inArray, max, ne } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../apps/console/src/operators/directory.ts';
import { bearer, OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { startTwoMerchants, type TwoMerchants } from './helpers/two-merchants.ts';

// Issue 51's acceptance, in a browser: merchants a and b and a worker; a floods (hundreds of pay-ins queued, its Get
// order slow-ish and capped at its budget) while b gets a steady trickle. An admin pauses a from its page with a
// reason: a's credits stop within 2 s of the page's reply while b's go on; a worker restart keeps a paused; the admin
// resumes a on the page and its backlog drains, every order credited once; the audit shows both actions with the
// merchant. Screenshots of the merchant page running and paused at 1366 and 375 px.
const FLOOD = 400;
const A_RPS = 40;
/** An operator of merchant b only (its operators-file entry says `merchants: ["b"]`). */
const B_ONLY = { name: 'bea.b@example.com', token: 'b-only-operator-token-0123456789' };
const env = useTestEnv();
let stack: TwoMerchants;
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchBrowser();
  stack = await startTwoMerchants(env, {
    entries: { a: { getOrderRps: A_RPS } },
    consoleDeps: {
      operators: [
        ...OPERATORS,
        { name: B_ONLY.name, role: 'operator', tokenSha256: sha256Hex(B_ONLY.token), merchants: ['b'] },
      ],
    },
  });
  stack.merchants.a.platform.setDelay(40);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

/**
 * b's steady trickle: one pay-in at a time, the next once the last is credited (paced by the worker, not a timer).
 * `stop()` ends it after the pay-in in progress and returns b's order numbers.
 */
function trickle(stack: TwoMerchants) {
  const nos: string[] = [];
  let stopping = false;
  const running = (async () => {
    while (!stopping) {
      const [no] = await stack.enqueuePayins('b', 1);
      nos.push(no!);
      await waitFor(async () => (await statusOf(no!)) === 'credited', {
        message: `b's ${no} not credited`,
        timeoutMs: 20_000,
      });
    }
  })();
  return {
    nos,
    stop: async () => {
      stopping = true;
      await running;
      return nos;
    },
  };
}

const statusOf = async (merchantOrderNo: string) =>
  (await env.db.db.select({ s: orders.status }).from(orders).where(eq(orders.merchantOrderNo, merchantOrderNo)))[0]?.s;

/** The page at both widths: no horizontal overflow, a screenshot of each; its main text, spaces folded. */
async function atBothWidths(page: Page, shot: string): Promise<string> {
  for (const width of [1366, 375]) {
    await page.setViewportSize({ width, height: width === 375 ? 800 : 900 });
    expect(
      await page.evaluate<number>('document.documentElement.scrollWidth'),
      `${shot} at ${width}`,
    ).toBeLessThanOrEqual(width);
    await page.screenshot({ path: path.join(ARTIFACTS, `${shot}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1366, height: 900 });
  return (await page.locator('main').innerText()).replace(/\s+/g, ' ');
}

/** Fill the reason and submit the page's form named `button`; the time the page's reply (its 303) arrived. */
async function submit(page: Page, button: string, reason: string): Promise<number> {
  await page.fill('form.pause-control input[name=reason]', reason);
  const [reply] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && /\/merchants\/a\/(pause|resume)$/.test(r.url())),
    page.getByRole('button', { name: button }).click(),
  ]);
  const at = Date.now();
  expect(reply.status()).toBe(303);
  await page.waitForURL(/\/merchants\/a\?ok=/);
  return at;
}

describe("an admin pauses a flooding merchant from its page while the other's callbacks go on", () => {
  it('stops a within 2 s, keeps it paused across a worker restart, drains it once after the resume, and audits both', async () => {
    const started = Date.now();
    const violations: string[] = [];
    const flood = await stack.enqueuePayins('a', FLOOD);
    const b = trickle(stack);
    const page = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    page.on('console', (m) => {
      if (/Content Security Policy|Refused/i.test(m.text())) violations.push(m.text());
    });
    try {
      // 1. The flood is being credited (at a's budget) when the admin signs in.
      await waitFor(async () => (await stack.credits('a')) >= 10, { message: 'a is not being credited' });
      await page.goto(`${stack.url}/login?next=/merchants`);
      await page.fill('#token', TOKENS.admin);
      await Promise.all([page.waitForURL(`${stack.url}/merchants`), page.click('button[type=submit]')]);
      const list = (await page.locator('main').innerText()).replace(/\s+/g, ' ');
      expect(list).toMatch(/a M-TWO-A-0001 running/);
      expect(list).toMatch(/b M-TWO-B-0002 running/);
      await page.getByRole('link', { name: 'a', exact: true }).click();
      await page.waitForURL(`${stack.url}/merchants/a`);
      const running = await atBothWidths(page, 'merchant-pause-running');
      expect(running).toMatch(/Why pause it\?/);
      expect(await page.getByRole('button', { name: 'Pause a' }).count()).toBe(1);

      // 2. Pause a with a reason: its credits stop within 2 s of the page's reply, b's go on.
      const replied = await submit(page, 'Pause a', 'platform incident on the a account');
      const pausedText = await atBothWidths(page, 'merchant-pause-paused');
      expect(pausedText).toMatch(/Merchant a paused/);
      expect(pausedText).toMatch(/Paused by ada\.admin@example\.com since .*: platform incident on the a account/);
      expect(await page.getByRole('button', { name: 'Resume a' }).count()).toBe(1);
      expect(await page.getByRole('button', { name: 'Pause a' }).count()).toBe(0);
      // b is credited more than 2.5 s after the reply (time has passed, and b goes on); a not after 2 s.
      await waitFor(async () => (await stack.credits('b', new Date(replied + 2500))) >= 1, {
        message: 'b not credited after a was paused',
      });
      expect(await stack.credits('a', new Date(replied + 2000))).toBe(0);
      const heldAtPause = await stack.credits('a');
      const [last] = await env.db.db
        .select({ at: max(ledgerEntries.createdAt) })
        .from(ledgerEntries)
        .where(eq(ledgerEntries.merchantNo, stack.merchants.a.merchantNo));
      const lastCreditMs = last!.at!.getTime() - replied;
      expect(heldAtPause).toBeLessThan(FLOOD);

      // 3. A worker restart: the new runner builds a's lane held; b is credited by it, a is not.
      const restartedAt = new Date();
      await stack.restartWorker();
      expect(stack.worker().lane('a').pausedSince()).toBeInstanceOf(Date);
      await waitFor(async () => (await stack.credits('b', restartedAt)) >= 3, {
        message: 'b not credited by the new worker',
      });
      expect(await stack.credits('a')).toBe(heldAtPause);

      // 4. Resume on the page with a reason: a's backlog drains, every order credited exactly once.
      await page.reload();
      const resumedAt = await submit(page, 'Resume a', 'platform fixed, draining');
      expect((await page.locator('main').innerText()).replace(/\s+/g, ' ')).toMatch(/Merchant a resumed/);
      await waitFor(async () => (await stack.credits('a')) === FLOOD, {
        message: `a's backlog not drained after the resume`,
        timeoutMs: 30_000,
      });
      const drainMs = Date.now() - resumedAt;
      const notCredited = await env.db.db
        .select({ no: orders.merchantOrderNo })
        .from(orders)
        .where(
          and(
            eq(orders.merchantNo, stack.merchants.a.merchantNo),
            inArray(orders.merchantOrderNo, flood),
            ne(orders.status, 'credited'),
          ),
        );
      expect(notCredited).toEqual([]);
      // Once each: one ledger entry per order (and the unique key forbids a second one anyway).
      expect(await stack.credits('a')).toBe(flood.length);
      expect(await env.db.db.select().from(merchantPauses)).toEqual([]);
      await atBothWidths(page, 'merchant-pause-resumed');

      // 5. The audit, on its page and through the API, shows both actions with the merchant.
      await page.goto(`${stack.url}/audit`);
      const audit = (await page.locator('main').innerText()).replace(/\s+/g, ' ');
      expect(audit).toMatch(/merchants\.resume.*merchant:a/);
      expect(audit).toMatch(/merchants\.pause.*merchant:a/);
      expect(audit).toContain('platform incident on the a account');
      const api = await stack.app.inject({ method: 'GET', url: '/api/audit', headers: bearer('admin') });
      const items = (api.json() as { entries: { action: string; target: string; reason: string }[] }).entries;
      expect(items.filter((i) => i.target === 'merchant:a').map((i) => [i.action, i.reason])).toEqual([
        ['merchants.resume', 'platform fixed, draining'],
        ['merchants.pause', 'platform incident on the a account'],
      ]);
      const rows = await env.db.db.select().from(operatorActions).where(eq(operatorActions.target, 'merchant:a'));
      expect(rows.map((r) => [r.action, r.outcome, r.operator, r.merchantNo]).sort()).toEqual([
        ['merchants.pause', 'paused', 'ada.admin@example.com', stack.merchants.a.merchantNo],
        ['merchants.resume', 'resumed', 'ada.admin@example.com', stack.merchants.a.merchantNo],
      ]);

      // b was credited throughout, each once.
      const bNos = await b.stop();
      for (const no of bNos) expect(await statusOf(no)).toBe('credited');
      expect(await stack.credits('b')).toBe(bNos.length);
      expect(violations).toEqual([]);
      console.info(
        `pause page test: ${FLOOD} a pay-ins, ${heldAtPause} credited before the pause (its last credit at ${lastCreditMs} ms from the page's reply), ` +
          `${bNos.length} b pay-ins; ` +
          `drain after resume ${drainMs} ms; whole walk ${Date.now() - started} ms`,
      );
    } finally {
      await b.stop().catch(() => undefined);
      await page.close();
    }
  }, 60_000);
});

describe('an operator scoped to b walks the console during a flood of a', () => {
  it("sees only b on every page, list and the dashboard; a's page, order and pause are refused, the refusal audited with a", async () => {
    const flood = await stack.enqueuePayins('a', 200);
    const b = trickle(stack);
    const page = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused/i.test(m.text())) violations.push(m.text());
    });
    /** What no page of the operator of b may show: a's number, a target of a, a link to a's page, an order of a. */
    const showsNothingOfA = (where: string, text: string, html: string) => {
      expect(text, where).not.toContain(stack.merchants.a.merchantNo);
      expect(text, where).not.toContain('merchant:a');
      expect(html, where).not.toContain('/merchants/a"');
      for (const no of flood) expect(text, `${where}: ${no}`).not.toContain(no);
    };
    try {
      await waitFor(async () => (await stack.credits('a', new Date(Date.now() - 1000))) >= 5, {
        message: 'a is not being credited',
      });
      await page.goto(`${stack.url}/login?next=/merchants`);
      await page.fill('#token', B_ONLY.token);
      await Promise.all([page.waitForURL(`${stack.url}/merchants`), page.click('button[type=submit]')]);
      const merchantsText = await atBothWidths(page, 'scoped-operator-merchants');
      expect(merchantsText).toContain(stack.merchants.b.merchantNo);
      showsNothingOfA('/merchants', merchantsText, await page.content());

      for (const path of ['/search', '/callbacks', '/reviews', '/replays', '/audit', '/merchants/b']) {
        const res = await page.goto(`${stack.url}${path}`);
        expect(res?.status(), path).toBe(200);
        showsNothingOfA(path, (await page.locator('main').innerText()).replace(/\s+/g, ' '), await page.content());
      }
      // b's callbacks are there (the trickle's first pay-in is credited by now).
      await page.goto(`${stack.url}/callbacks?merchantOrderNo=${encodeURIComponent(b.nos[0]!)}`);
      expect(await page.locator('main').innerText()).toContain(b.nos[0]!);

      // a's page and one of a's orders answer as if they did not exist.
      expect((await page.goto(`${stack.url}/merchants/a`))?.status()).toBe(404);
      expect((await page.goto(`${stack.url}/orders/${flood[0]}`))?.status()).toBe(404);
      // The dashboard's queues: b's only.
      const board = await page.request.get(`${stack.url}/queues/api/queues`);
      expect(board.status()).toBe(200);
      const names = ((await board.json()) as { queues: { name: string }[] }).queues.map((q) => q.name);
      expect(names).toEqual([stack.queues.of('b').queue.name]);
      // a's pause, posted as the form would be: 403, a denied row naming a, a still running.
      const refused = await page.request.post(`${stack.url}/merchants/a/pause`, {
        form: { reason: 'not mine to pause' },
        headers: { origin: stack.url },
        maxRedirects: 0,
      });
      expect(refused.status()).toBe(403);
      const [denied] = await env.db.db
        .select()
        .from(operatorActions)
        .where(and(eq(operatorActions.operator, B_ONLY.name), eq(operatorActions.action, 'merchants.pause')));
      expect(denied).toMatchObject({ outcome: 'denied', merchantNo: stack.merchants.a.merchantNo });
      expect(await env.db.db.select().from(merchantPauses)).toEqual([]);
      // Meanwhile a's flood went on being credited, and b's trickle too.
      await waitFor(async () => (await stack.credits('a')) === FLOOD + flood.length, {
        message: "a's flood not credited",
        timeoutMs: 30_000,
      });
      const bNos = await b.stop();
      for (const no of bNos) expect(await statusOf(no)).toBe('credited');
      expect(violations).toEqual([]);
    } finally {
      await b.stop().catch(() => undefined);
      await page.close();
    }
  }, 60_000);
});
