import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackJobOptions, type CallbackJobInput } from '@mcb/core/queue';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

type PayinInput = Extract<CallbackJobInput, { kind: 'payin' }>;

// Issue 38, "an order story that is only added to": a job failed for good in an outage is replayed from the order
// page; a dashboard retry follows; a forged variant arrives. The page keeps every row, names who did what and why,
// and tells the operator what to say to the customer.
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

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Win = any;
const scrollsSideways = (page: Page) =>
  page.evaluate(
    () => (globalThis as Win).document.documentElement.scrollWidth > (globalThis as Win).innerWidth,
  ) as Promise<boolean>;
const pageWidth = (page: Page) =>
  page.evaluate(() => (globalThis as Win).document.documentElement.scrollWidth) as Promise<number>;
const shot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(ARTIFACTS, `order-story-${name}.png`), fullPage: true });

async function logIn(page: Page, token: string) {
  await page.goto(`${stack.url}/login?next=/search`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${stack.url}/search`), page.keyboard.press('Enter')]);
}

describe('the order page tells a story that is only added to', () => {
  it('after an outage, "Replay this job", a dashboard retry and a forgery: every row stays, with who and why, and a line for the customer', async () => {
    const no = uid();
    const o = {
      merchantOrderNo: `MO-STORY-LONG-MERCHANT-ORDER-NUMBER-${no}`,
      orderNo: `P-STORY-LONG-PLATFORM-ORDER-${no}`,
    };
    await createOrder(env.db.db, { ...o, kind: 'payin', amount: '1234.50', currency: 'INR' });
    stack.platform.setOutage(503);
    const genuine = payinEvent({ ...o, fiatAmount: '1234.50' }) as PayinInput;
    const jobId = await stack.add(genuine, 3);
    await waitFor(async () => (await stack.queue.getJobState(jobId)) === 'failed', {
      timeoutMs: 20_000,
      message: 'the outage did not fail the job',
    });
    stack.platform.setOutage(undefined);
    stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '1234.50', currency: 'INR' }));
    const orderUrl = `${stack.url}/orders/${o.merchantOrderNo}`;

    // A viewer sees the failure and the customer line, and no replay control.
    const viewer = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    try {
      await logIn(viewer, TOKENS.viewer);
      await viewer.goto(orderUrl);
      expect(await viewer.locator('#customer-line').innerText()).toMatch(
        /Not credited yet: the platform's callback failed for good at .* and waits for an operator to replay it\./,
      );
      expect(await viewer.getByRole('button', { name: 'Replay this job' }).count()).toBe(0);
      await viewer.getByText('replaying needs the role operator (you are viewer)').waitFor();
    } finally {
      await viewer.close();
    }

    const page = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    try {
      await logIn(page, TOKENS.operator);
      await page.goto(orderUrl);
      await shot(page, '1-failed-1366');
      await page.getByLabel(/Why replay job/).fill('Get order was down (503); the customer paid');
      await Promise.all([page.waitForURL(/\?ok=/), page.getByRole('button', { name: 'Replay this job' }).click()]);
      await page.getByText(`Job ${jobId} sent back to the queue with a fresh retry budget`).waitFor();
      await waitFor(async () => (await ledgerOf(env.db.db, o.merchantOrderNo)).order.status === 'credited', {
        timeoutMs: 15_000,
        message: 'the replay did not credit',
      });

      // A dashboard retry of the credited job, as bull-board's page sends it (the reason in X-Reason).
      const finishedOn = (await stack.queue.getJob(jobId))!.finishedOn!;
      const put = await page.request.put(
        `${stack.url}/queues/api/queues/callbacks/${encodeURIComponent(jobId)}/retry`,
        {
          headers: { 'x-reason': encodeURIComponent('customer says it is not credited'), origin: stack.url! },
        },
      );
      expect(put.status(), await put.text()).toBe(204);
      await waitFor(
        async () => {
          const job = await stack.queue.getJob(jobId);
          return job?.finishedOn && job.finishedOn > finishedOn && (await job.getState()) === 'completed';
        },
        { message: 'the retried job did not complete' },
      );

      // A forged variant of the applied pair (ingest queues it under the contract id plus a digest).
      await stack.queue.add(
        'payin',
        { ...genuine, fiatAmount: '999999.99' },
        { ...callbackJobOptions, jobId: `${jobId}-forged-0123456789abcdef` },
      );
      await page.goto(orderUrl);
      await waitFor(
        async () => {
          await page.reload();
          return (await page.locator('span.status', { hasText: 'differs from what was applied' }).count()) > 0;
        },
        { timeoutMs: 15_000, message: 'the forgery is not on the order page' },
      );

      expect(await page.locator('#customer-line').innerText()).toMatch(
        /^For the customer: Credited at .*: 1,234\.50 INR\.$/,
      );
      const rows = page.locator('table.stack tbody tr');
      const texts = await rows.allInnerTexts();
      const row = (re: RegExp) => texts.filter((t) => re.test(t));
      // The outage: each failed attempt, and the failure for good, still there.
      expect(row(/attempt failed/)).toHaveLength(3);
      expect(row(/job failed for good/)).toHaveLength(1);
      // The replay: who and why, with a link to its audit row.
      expect(
        row(
          /replayed from the order page by otto\.operator@example\.com: Get order was down \(503\); the customer paid/,
        ),
      ).toHaveLength(1);
      // Both settlements: the credit and, after the dashboard retry, the duplicate.
      expect(row(/attempt 1 settled it: credited/)).toHaveLength(1);
      expect(row(/attempt 1 settled it: duplicate/)).toHaveLength(1);
      expect(
        row(/retried from the dashboard by otto\.operator@example\.com: customer says it is not credited/),
      ).toHaveLength(1);
      // The forged variant: its own job, and the finding.
      expect(row(/forged-0123456789abcdef/).length).toBeGreaterThan(0);
      expect(
        row(/\tsuspected forgery: differs from what was applied\t[\s\S]*999999\.99, applied 1234\.50/),
      ).toHaveLength(1);
      expect(await page.getByRole('link', { name: 'audit', exact: true }).count()).toBe(2);
      expect((await ledgerOf(env.db.db, o.merchantOrderNo)).ledger).toHaveLength(1);
      await shot(page, '2-after-1366');

      // A phone: the page fits 375 px, nothing hidden.
      await page.setViewportSize({ width: 375, height: 800 });
      await page.reload();
      await shot(page, '3-after-375');
      await page.locator('#review-1').scrollIntoViewIfNeeded();
      await page.screenshot({ path: path.join(ARTIFACTS, 'order-story-4-review-card-375.png') });
      expect(await pageWidth(page), 'the order page is wider than 375 px').toBeLessThanOrEqual(375);
      expect(await scrollsSideways(page)).toBe(false);
      expect(await page.locator('#customer-line').isVisible()).toBe(true);
    } finally {
      await page.close();
    }
  }, 90_000);
});
