import path from 'node:path';
import { createOrder, payinEvent, uid, useTestEnv } from '@mcb/testkit';
import { callbackJobId, callbackJobOptions } from '@mcb/core/queue';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// Issue 49, as an operator sees it: two callbacks wait on the queue with no row in the lists (their rows not written
// yet). The landing page says the queue and the lists differ, and the order page does not say none arrived.
const env = useTestEnv();
let stack: OpsStack;
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchBrowser();
  stack = await startOpsStack(env, { listen: true, consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

describe('the lists behind the queue, in a browser', () => {
  it('the landing page says the queue holds callbacks the lists do not know; the order page cannot tell', async () => {
    const no = uid();
    const o = { merchantOrderNo: `MO-LBQ-${no}`, orderNo: `P-LBQ-${no}`, amount: '40.00' };
    await createOrder(env.db.db, { ...o, kind: 'payin', currency: 'INR' });
    for (const event of [
      payinEvent({ ...o, fiatAmount: o.amount }),
      payinEvent({ ...o, fiatAmount: o.amount, state: 3 }),
    ]) {
      const jobId = callbackJobId('payin', event.orderNo, event.state);
      await stack.queue.add('payin', event, { ...callbackJobOptions, jobId, delay: 600_000 });
    }
    const page = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    try {
      await page.goto(`${stack.url}/login?next=/`);
      await page.fill('#token', TOKENS.viewer);
      await Promise.all([page.waitForURL(`${stack.url}/search`), page.press('#token', 'Enter')]);
      const notice = page.locator('#queue-against-lists');
      await notice.waitFor();
      expect(await notice.textContent()).toContain('the queue holds 2 unfinished and 0 failed callbacks');
      expect(await notice.textContent()).toContain('the lists know 0 unfinished');
      await page.screenshot({ path: path.join(ARTIFACTS, 'lists-behind-queue-landing-1366.png'), fullPage: true });

      await page.goto(`${stack.url}/orders/${o.merchantOrderNo}`);
      const line = await page.locator('#customer-line').textContent();
      expect(line).toContain('the lists cannot tell whether one arrived');
      expect(line).not.toMatch(/has arrived yet/);
      await page.setViewportSize({ width: 375, height: 800 });
      await page.screenshot({ path: path.join(ARTIFACTS, 'lists-behind-queue-order-375.png'), fullPage: true });
    } finally {
      await page.close();
    }
  });
});
