import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { callbackArrivals, operatorActions } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq, inArray } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { MERCHANT_NO, ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchBrowser();
  stack = await startOpsStack(env, { worker: true, listen: true, consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

const N = 12;
const shot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(ARTIFACTS, `outage-${name}.png`), fullPage: true });

/** The page's globals, untyped: this project's TypeScript has no DOM types. Functions, not strings: the CSP forbids eval. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Win = any;

/** Whether the page scrolls sideways (its content wider than the viewport). */
const scrollsSideways = (page: Page) =>
  page.evaluate(
    () => (globalThis as Win).document.documentElement.scrollWidth > (globalThis as Win).innerWidth,
  ) as Promise<boolean>;

describe('an outage worked from the landing page, in a browser', () => {
  it('failed jobs found by links, dry-run with the money, replayed; a cancel reason survives the counters refreshing; the order keeps its failure', async () => {
    // The budget is the setting, set low as a demo would: each job fails for good after 3 attempts of the outage.
    const { CALLBACK_JOB_ATTEMPTS: attempts } = loadConfig({ MERCHANT_NO, CALLBACK_JOB_ATTEMPTS: '3' }, 'cli');
    stack.platform.setOutage(503);
    const orders: { merchantOrderNo: string; orderNo: string; amount: string; jobId: string }[] = [];
    for (let i = 0; i < N; i++) {
      const no = uid();
      const o = { merchantOrderNo: `MO-OUT-${no}`, orderNo: `P-OUT-${no}`, amount: `${1000 + i * 250}.50` };
      await createOrder(env.db.db, { ...o, kind: 'payin', currency: 'INR' });
      orders.push({ ...o, jobId: await stack.add(payinEvent({ ...o, fiatAmount: o.amount }), attempts) });
    }
    const ids = orders.map((o) => o.jobId);
    await waitFor(
      async () =>
        (
          await env.db.db
            .select()
            .from(callbackArrivals)
            .where(and(inArray(callbackArrivals.jobId, ids), eq(callbackArrivals.status, 'failed')))
        ).length === N,
      {
        timeoutMs: 30_000,
        message: 'the outage did not leave the jobs failed',
      },
    );
    expect((await stack.queue.getJob(ids[0]!))!.attemptsMade).toBe(3);
    // The platform is back.
    stack.platform.setOutage(undefined);
    for (const o of orders)
      stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: o.amount, currency: 'INR' }));
    // 12 × 1,000.50 + 250 × (0 + 1 + ... + 11): what the replay will credit.
    const expectedTotal = '28,506.00';

    const page = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    try {
      await page.goto(`${stack.url}/login?next=/`);
      await page.fill('#token', TOKENS.operator);
      await Promise.all([page.waitForURL(`${stack.url}/search`), page.press('#token', 'Enter')]);

      // Landing page → the failed list, by its link.
      await page.getByRole('heading', { name: 'What waits' }).waitFor();
      expect(await page.locator('[data-count=failed]').textContent()).toBe(String(N));
      await shot(page, '1-landing-1366');
      await Promise.all([
        page.waitForURL(/\/callbacks\?status=failed$/),
        page.getByRole('link', { name: `${N} failed` }).click(),
      ]);
      await page.getByRole('heading', { name: `${N} callback(s) match` }).waitFor();
      expect(await page.locator('tr[data-job]').count()).toBe(N);
      await shot(page, '2-failed-list-1366');

      // Dry run from the list: the money is totalled.
      await Promise.all([
        page.waitForURL(/\/replays\/new\?status=failed&dryRun=1/),
        page.getByRole('link', { name: `Dry run a replay of these ${N} failed job(s)` }).click(),
      ]);
      const summary = await page.locator('[data-plan-summary]').textContent();
      expect(summary).toBe(
        `Will credit ${N} orders, ${expectedTotal} INR; finalise 0 payouts; 0 into review; 0 back to retrying with a fresh budget.`,
      );
      await shot(page, '3-dry-run-1366');

      // Start slowly (1 per second), so it runs while the operator types.
      await page.getByLabel(/^Reason \(required, kept/).fill('Get order was down (503); customers paid');
      await page.getByLabel(/Jobs per second/).fill('1');
      await Promise.all([
        page.waitForURL(/\/replays\/\d+\?ok=/),
        page.getByRole('button', { name: `Start replay of ${N} job(s)` }).click(),
      ]);
      const id = /\/replays\/(\d+)/.exec(page.url())![1]!;
      await page.getByRole('heading', { name: `Replay ${id}` }).waitFor();

      // Type a cancel reason at a person's speed; the counters refresh around it, the text and the focus stay.
      const reason = page.getByLabel('Reason (required)');
      await reason.click();
      await page.keyboard.type('stop: the platform asks us to wait', { delay: 40 });
      const pollsBefore = Number((await page.locator('[data-replay-id]').getAttribute('data-polls')) ?? 0);
      await page.waitForFunction(
        (n) => Number((globalThis as Win).document.querySelector('[data-replay-id]')?.getAttribute('data-polls')) >= n,
        pollsBefore + 3,
        { timeout: 20_000 },
      );
      expect(await reason.inputValue()).toBe('stop: the platform asks us to wait');
      expect(await page.evaluate(() => (globalThis as Win).document.activeElement?.getAttribute('name'))).toBe(
        'reason',
      );
      expect(Number(await page.locator('[data-replayed]').textContent())).toBeGreaterThan(0);
      expect(page.url()).toMatch(new RegExp(`/replays/${id}\\?ok=`)); // never reloaded
      await page.locator('[data-outcome=credited]').first().waitFor();
      await shot(page, '4-running-cancel-typed-1366');

      // Cancel by keyboard: Tab to the button, Enter.
      await page.keyboard.press('Tab');
      await Promise.all([page.waitForURL(/\?ok=replay/), page.keyboard.press('Enter')]);
      await page.locator('[data-status=cancelled]').waitFor();
      await page.getByRole('heading', { name: 'Replay the rest' }).waitFor();
      await shot(page, '5-cancelled-1366');
      const audit = await env.db.db
        .select()
        .from(operatorActions)
        .where(eq(operatorActions.operator, 'otto.operator@example.com'));
      expect(audit.map((a) => [a.action, a.outcome, a.reason])).toEqual([
        ['replays.start', 'started', 'Get order was down (503); customers paid'],
        ['replays.cancel', 'cancelled', 'stop: the platform asks us to wait'],
      ]);

      // An order the replay credited before the cancel (the driver picks the jobs' order, not this test); its page
      // still shows the outage's failed attempts.
      const first = await waitFor(
        async () => {
          for (const o of orders)
            if ((await ledgerOf(env.db.db, o.merchantOrderNo)).order.status === 'credited') return o;
          return undefined;
        },
        { timeoutMs: 15_000, message: 'no order credited by the replay' },
      );
      await page.goto(`${stack.url}/orders/${first.merchantOrderNo}`);
      expect(await page.locator('tr', { hasText: 'attempt failed' }).count()).toBe(3);
      await page.getByText('PLATFORM_HTTP_ERROR').first().waitFor();
      await page.getByText('credited').first().waitFor();
      // The replay that repaired it is part of its story: who, and why.
      await page
        .getByText(
          `sent back to the queue by replay ${id} of otto.operator@example.com: Get order was down (503); customers paid`,
        )
        .waitFor();
      await shot(page, '6-order-1366');
      await page.goto(`${stack.url}/replays`);
      await page.getByRole('heading', { name: 'Replays' }).waitFor();
      await shot(page, '7-replays-1366');

      // A phone: every page the operator used fits 375 px, nothing scrolls sideways.
      await page.setViewportSize({ width: 375, height: 800 });
      const pages: [string, string][] = [
        ['landing', '/search'],
        ['failed-list', '/callbacks?status=failed'],
        ['dry-run', '/replays/new?status=failed&dryRun=1'],
        ['replay', `/replays/${id}`],
        ['replays', '/replays'],
        ['order', `/orders/${first.merchantOrderNo}`],
        ['audit', '/audit'],
      ];
      for (const [name, url] of pages) {
        await page.goto(`${stack.url}${url}`);
        await shot(page, `8-${name}-375`);
        expect(await scrollsSideways(page), `${url} scrolls sideways at 375 px`).toBe(false);
      }
      // No 404 for the icon a browser asks for.
      expect((await page.request.get(`${stack.url}/favicon.ico`)).status()).toBe(204);
      expect((await page.request.get(`${stack.url}/assets/favicon.svg`)).headers()['content-type']).toBe(
        'image/svg+xml',
      );
    } finally {
      await page.close();
    }
  }, 120_000);
});
