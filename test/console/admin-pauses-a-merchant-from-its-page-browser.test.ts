import path from 'node:path';
import { ledgerEntries, merchantPauses, operatorActions, orders } from '@mcb/core/db';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq, inArray, max, ne } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { startTwoMerchants, type TwoMerchants } from './helpers/two-merchants.ts';

// Issue 51's acceptance, in a browser: merchants a and b and a worker; a floods (hundreds of pay-ins queued, its Get
// order slow-ish and capped at its budget) while b gets a steady trickle. An admin pauses a from its page with a
// reason: a's credits stop within 2 s of the page's reply while b's go on; a worker restart keeps a paused; the admin
// resumes a on the page and its backlog drains, every order credited once; the audit shows both actions with the
// merchant. Screenshots of the merchant page running and paused at 1366 and 375 px.
const FLOOD = 400;
const A_RPS = 40;
const env = useTestEnv();
let stack: TwoMerchants;
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchBrowser();
  stack = await startTwoMerchants(env, { entries: { a: { getOrderRps: A_RPS } } });
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

describe('an operator scoped to b walks the console during a flood (issue 51, `scope`)', () => {
  // THE SPOT FOR THE SCOPED OPERATOR's walk, to be written once the `scope` branch (operators scoped to merchants)
  // merges: an operator whose operators-file entry says `merchants: ["b"]` signs in while a floods, and the merchants
  // page, the landing page, the lists (orders, callbacks, reviews, replays, events, audit) and the dashboard show only
  // b; a's page and its pause form are 403 with a `denied` audit row. Use this file's stack (startTwoMerchants) and
  // its flood; nothing here yet, since scoping does not exist on main.
  it.todo('shows an operator scoped to b only b during a flood of a (after `scope` merges)');
});
