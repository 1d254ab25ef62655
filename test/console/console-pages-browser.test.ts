import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reviews } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
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

/** A pay-in whose Get order first reports another amount (the worker opens a review), then the right one. */
async function reviewedPayin() {
  const no = uid();
  const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '100.00' });
  stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '99.00' }));
  await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '100.00' }));
  const [review] = await waitFor(async () => {
    const rows = await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, merchantOrderNo));
    return rows.length ? rows : undefined;
  });
  return { merchantOrderNo, orderNo, reviewId: review!.id };
}

async function logIn(page: Page, token: string) {
  await page.goto(`${stack.url}/`);
  await expect(page.locator('#login')).toBeDefined();
  await page.goto(`${stack.url}/login?next=/search`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${stack.url}/search`), page.keyboard.press('Enter')]);
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(ARTIFACTS, `console-${name}.png`), fullPage: true });

describe('the console pages in a browser', () => {
  it('an operator finds an order by its number, reads its timeline, re-verifies its review with a note, and the audit page shows it', async () => {
    const { merchantOrderNo, reviewId } = await reviewedPayin();
    const page = await browser!.newPage();
    try {
      await logIn(page, TOKENS.operator);
      await expect(page.getByText('otto.operator@example.com')).toBeDefined();
      await shot(page, 'search');

      // 1. The number the customer quotes, typed into the focused search box, opens the order's page.
      await waitForFocus(page, 'q');
      await page.keyboard.type(merchantOrderNo);
      await Promise.all([page.waitForURL(`${stack.url}/orders/${merchantOrderNo}`), page.keyboard.press('Enter')]);
      await page.getByRole('heading', { name: /Timeline/ }).waitFor();
      expect(await page.locator('table').last().innerText()).toMatch(/review opened[\s\S]*VERIFY_AMOUNT_MISMATCH/);
      expect(await page.locator('dl.facts').first().innerText()).toContain('100.00 PHP');
      await shot(page, 'order-with-review');

      // 2. The platform now confirms the amount: re-verify, with the operator's note, from the order page.
      stack.platform.setOrder(
        platformOrder({
          orderNo: `P-${merchantOrderNo.slice(3)}`,
          merchantOrderNo,
          type: 'payin',
          state: 6,
          amountJson: '100.00',
        }),
      );
      const card = page.locator(`#review-${reviewId}`);
      await card.getByLabel('Why re-verify now?').fill('platform support confirmed 100.00 by phone (ticket 7781)');
      await Promise.all([
        page.waitForURL(/ok=/),
        card.getByRole('button', { name: `Re-verify review ${reviewId}` }).click(),
      ]);
      await page.getByRole('status').filter({ hasText: 'credited (or finalised) once' }).waitFor();
      expect(await page.locator('h1').innerText()).toMatch(/credited/);
      expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toHaveLength(1);
      await shot(page, 'order-credited');

      // 3. The audit page names the operator, the action, the review and the reason.
      await page.getByRole('link', { name: 'Audit', exact: true }).click();
      const row = page.locator('tr', { hasText: `review:${reviewId}` });
      await row.waitFor();
      expect(await row.innerText()).toMatch(
        /otto\.operator@example\.com[\s\S]*reviews\.reverify[\s\S]*platform support confirmed 100\.00 by phone \(ticket 7781\)[\s\S]*applied/,
      );
      await shot(page, 'audit');

      // 4. The reviews inbox, now without it.
      await page.getByRole('link', { name: 'Reviews' }).click();
      expect(await page.locator(`#review-${reviewId}`).count()).toBe(0);
      await shot(page, 'reviews');
    } finally {
      await page.close();
    }
  }, 90_000);

  it('a viewer sees the order, its review and the inbox with no action control, and the same posts answer 403', async () => {
    const { merchantOrderNo, reviewId } = await reviewedPayin();
    const page = await browser!.newPage();
    try {
      await logIn(page, TOKENS.viewer);
      await page.goto(`${stack.url}/orders/${merchantOrderNo}`);
      await page.locator(`#review-${reviewId}`).waitFor();
      expect(await page.locator('main form').count()).toBe(0);
      expect(await page.getByRole('button', { name: /re-verify|dismiss/i }).count()).toBe(0);
      await shot(page, 'order-viewer');
      await page.goto(`${stack.url}/reviews`);
      await page.locator(`#review-${reviewId}`).waitFor();
      expect(await page.locator('main form[method=post]').count()).toBe(0);
      await shot(page, 'reviews-viewer');

      // The posts the operator's page would send, with the viewer's session, from this origin (the page's CSP lets
      // no script fetch, so they go through the browser context's request API with the page's Origin).
      const origin = { origin: stack.url! };
      const form = (url: string) =>
        page.request.post(`${stack.url}${url}`, { headers: origin, form: { reason: 'x' }, maxRedirects: 0 });
      const json = (url: string, data: object) =>
        page.request.post(`${stack.url}${url}`, { headers: origin, data, maxRedirects: 0 });
      const answers = await Promise.all([
        form(`/reviews/${reviewId}/reverify`),
        form(`/reviews/${reviewId}/dismiss`),
        json(`/api/reviews/${reviewId}/reverify`, { reason: 'x' }),
        json(`/api/reviews/${reviewId}/dismiss`, { reason: 'x' }),
        json('/api/payins', { reason: 'x', merchantOrderNo: 'V-1', currency: 'PHP', amount: '1' }),
      ]);
      const statuses = answers.map((a) => a.status());
      expect((await answers[2]!.json()) as object).toMatchObject({ code: 'FORBIDDEN', requiredRole: 'operator' });
      expect(await answers[0]!.text()).toContain('needs the role operator');
      expect(statuses).toEqual([403, 403, 403, 403, 403]);
      const [row] = await env.db.db.select().from(reviews).where(eq(reviews.id, reviewId));
      expect(row!.status).toBe('open');
    } finally {
      await page.close();
    }
  }, 60_000);
});
