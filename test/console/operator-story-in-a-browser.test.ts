import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, reviews } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser, waitForFocus } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

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

/** Pay-ins whose only callback failed for good while Get order answered 500; then the platform is fixed. */
async function failedPayins(n: number) {
  const made = [];
  for (let i = 0; i < n; i++) {
    const no = uid();
    const o = { merchantOrderNo: `MO-ST-${no}`, orderNo: `P-ST-${no}` };
    await createOrder(env.db.db, { ...o, kind: 'payin', amount: '75.00' });
    stack.platform.failNext(o.merchantOrderNo, 1, 500);
    made.push({ ...o, jobId: await stack.add(payinEvent({ ...o, fiatAmount: '75.00' }), 1) });
  }
  for (const o of made) {
    await waitFor(
      async () =>
        (
          await env.db.db
            .select()
            .from(callbackArrivals)
            .where(and(eq(callbackArrivals.jobId, o.jobId), eq(callbackArrivals.status, 'failed')))
        )[0],
      { message: `${o.jobId} did not fail` },
    );
    stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '75.00' }));
  }
  return made;
}

/** A pay-in whose Get order reported another amount (a review), then the right one. */
async function reviewedPayin() {
  const no = uid();
  const o = { merchantOrderNo: `MO-RV-${no}`, orderNo: `P-RV-${no}` };
  await createOrder(env.db.db, { ...o, kind: 'payin', amount: '100.00' });
  stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '99.00' }));
  await stack.add(payinEvent({ ...o, fiatAmount: '100.00' }));
  const [review] = await waitFor(async () => {
    const rows = await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, o.merchantOrderNo));
    return rows.length ? rows : undefined;
  });
  stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '100.00' }));
  return { ...o, reviewId: review!.id };
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(ARTIFACTS, `operator-story-${name}.png`), fullPage: true });

describe('an operator on a bad morning, in a browser', () => {
  it('finds a failed order by its merchant number, reads its timeline, re-verifies a review with a note, dry-runs and runs a replay of failed jobs, and the audit shows it all', async () => {
    const failed = await failedPayins(4);
    const reviewed = await reviewedPayin();
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await page.goto(`${stack.url}/login?next=/search`);
      await page.fill('#token', TOKENS.operator);
      await Promise.all([page.waitForURL(`${stack.url}/search`), page.keyboard.press('Enter')]);

      // 1. "I paid and was not credited": the merchant order number finds the order, and its timeline says why.
      const customer = failed[0]!;
      await waitForFocus(page, 'q');
      await page.keyboard.type(customer.merchantOrderNo);
      await Promise.all([
        page.waitForURL(`${stack.url}/orders/${customer.merchantOrderNo}`),
        page.keyboard.press('Enter'),
      ]);
      await page.getByRole('heading', { name: /Timeline/ }).waitFor();
      const timeline = await page.locator('table').last().innerText();
      expect(timeline).toMatch(/attempt failed[\s\S]*PLATFORM_HTTP_ERROR/i);
      expect(timeline).toMatch(/failed for good after 1 attempt/);
      await shot(page, '1-order-failed-job');

      // 2. Another order's review: re-verified with a note, from its page.
      await page.goto(`${stack.url}/orders/${reviewed.merchantOrderNo}`);
      const card = page.locator(`#review-${reviewed.reviewId}`);
      await card.getByLabel('Why re-verify now?').fill('platform confirmed 100.00 (ticket 7781)');
      await Promise.all([
        page.waitForURL(/ok=/),
        card.getByRole('button', { name: `Re-verify review ${reviewed.reviewId}` }).click(),
      ]);
      await page.getByRole('status').filter({ hasText: 'credited (or finalised) once' }).waitFor();
      await shot(page, '2-review-reverified');

      // 3. The replay wizard: the failed jobs of the outage, dry run first.
      await page.getByRole('link', { name: 'Replays', exact: true }).click();
      await page.getByRole('link', { name: /New replay by filter/ }).click();
      await page.getByLabel('Last error code').fill('PLATFORM_HTTP_ERROR');
      await Promise.all([page.waitForURL(/dryRun=1/), page.getByRole('button', { name: 'Dry run' }).click()]);
      await page.getByRole('heading', { name: 'Dry run: 4 failed job(s) match' }).waitFor();
      expect(await page.locator('td[data-class=willApply]').textContent()).toBe('4');
      await shot(page, '3-dry-run');

      // 4. Start with a reason; the progress page refreshes itself until it is finished.
      await page.getByLabel(/^Reason/).fill('Get order answered 500 from 09:10 to 09:25 (platform incident 42)');
      await page.getByLabel(/Jobs per second/).fill('4');
      await Promise.all([
        page.waitForURL(/\/replays\/\d+\?ok=/),
        page.getByRole('button', { name: 'Start replay of 4 job(s)' }).click(),
      ]);
      await page.locator('[data-status=finished]').waitFor({ timeout: 20_000 });
      expect(await page.locator('[data-replayed]').textContent()).toBe('4');
      await shot(page, '4-replay-finished');
      for (const o of failed) {
        await waitFor(async () => (await ledgerOf(env.db.db, o.merchantOrderNo)).order.status === 'credited', {
          timeoutMs: 15_000,
          message: `${o.merchantOrderNo} not credited`,
        });
        expect((await ledgerOf(env.db.db, o.merchantOrderNo)).ledger).toHaveLength(1);
      }

      // 5. The customer's order is credited now, and its page says so.
      await page.goto(`${stack.url}/orders/${customer.merchantOrderNo}`);
      expect(await page.locator('h1').innerText()).toMatch(/credited/);

      // 6. The audit page: each action with the operator's name and reason.
      await page.getByRole('link', { name: 'Audit', exact: true }).click();
      const reverify = page.locator('tr', { hasText: `review:${reviewed.reviewId}` });
      await reverify.waitFor();
      expect(await reverify.innerText()).toMatch(
        /otto\.operator@example\.com[\s\S]*reviews\.reverify[\s\S]*platform confirmed 100\.00 \(ticket 7781\)/,
      );
      const replay = page.locator('tr', { hasText: 'replays.start' });
      expect(await replay.innerText()).toMatch(
        /otto\.operator@example\.com[\s\S]*callbacks:code=PLATFORM_HTTP_ERROR[\s\S]*platform incident 42[\s\S]*started/,
      );
      await shot(page, '5-audit');
    } finally {
      await page.close();
    }
  }, 120_000);
});
