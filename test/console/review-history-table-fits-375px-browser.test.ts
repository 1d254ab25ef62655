import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reviewAttempts, reviews } from '@mcb/core/db';
import { createOrder, uid, useTestEnv } from '@mcb/testkit';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let browser: Browser | undefined;
const merchantOrderNo = `MO-HIST-${uid()}`;

beforeAll(async () => {
  browser = await launchBrowser();
  stack = await startOpsStack(env, { listen: true, consoleDeps: { operators: OPERATORS } });
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '50.00' });
  const [review] = await env.db.db
    .insert(reviews)
    .values({
      kind: 'payin',
      orderNo: `P-${merchantOrderNo}`,
      state: 6,
      merchantOrderNo,
      reasonCode: 'VERIFY_AMOUNT_MISMATCH',
      reason: 'Get order confirms 50.00, the callback says 9999.99',
      event: {},
    })
    .returning();
  const why = 'Get order still answers another amount than the callback claims: the platform support was asked again';
  await env.db.db.insert(reviewAttempts).values(
    ['review', 'callback', 'reconcile'].map((source) => ({
      reviewId: review!.id,
      source: source as 'review' | 'callback' | 'reconcile',
      outcome: 'unconfirmed' as const,
      reasonCode: 'VERIFY_AMOUNT_MISMATCH_AFTER_REVERIFY_OF_THE_PAIR',
      reason: why,
    })),
  );
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

async function logIn(page: Page) {
  await page.goto(`${stack.url}/login?next=/search`);
  await page.fill('#token', TOKENS.operator);
  await Promise.all([page.waitForURL(`${stack.url}/search`), page.keyboard.press('Enter')]);
}

describe("a review's history on a phone", () => {
  it('fits 375 px: no sideways scrolling, each attempt a block of labelled lines', async () => {
    const page = await browser!.newPage({ viewport: { width: 375, height: 900 } });
    try {
      await logIn(page);
      await page.goto(`${stack.url}/reviews?merchantOrderNo=${merchantOrderNo}`);
      const history = page.locator('table[aria-label^="History of review"]');
      expect(await history.count()).toBe(1);
      await history.scrollIntoViewIfNeeded();
      expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
      const box = await history.boundingBox();
      expect(box!.x + box!.width).toBeLessThanOrEqual(375);
      expect(await history.locator('td[data-label="Why"]').first().innerText()).toContain('platform support');
      await page.screenshot({ path: path.join(ARTIFACTS, 'console-review-history-375.png'), fullPage: true });
    } finally {
      await page.close();
    }
  });
});
