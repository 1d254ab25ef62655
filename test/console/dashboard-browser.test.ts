import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { chromium, type Browser } from 'playwright-core';
import { ledgerOf, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACT = path.resolve(import.meta.dirname, '../../../test-results/dashboard-retry.png');

const env = useTestEnv();
let stack: OpsStack;
let browser: Browser | undefined;

beforeAll(async () => {
  // No silent skip: CI installs Debian's chromium (.ci/run); without it this test must say what to do.
  if (!existsSync(CHROMIUM)) throw new Error(`chromium not found at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  stack = await startOpsStack(env, { worker: true, listen: true });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

describe('the dashboard in a browser', () => {
  it('an operator logs in, finds the failed job, retries it after the cause is fixed, and the order is credited once', async () => {
    // 1. A pay-in whose Get order keeps failing: the job exhausts its attempts and fails.
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '250.00' });
    stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '250.00' }));
    stack.platform.failNext(merchantOrderNo, 1_000, 500);
    const jobId = await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '250.00' }), 2);
    await waitFor(async () => (await stack.queue.getJobState(jobId)) === 'failed', { message: 'job did not fail' });

    const page = await browser!.newPage();
    try {
      // 2. Without a session the dashboard answers 401 and links to the login form.
      const denied = await page.goto(`${stack.url}/queues`);
      expect(denied?.status()).toBe(401);
      await page.click('#login');

      // 3. Log in through the form; the session cookie brings the browser back to the dashboard.
      await page.fill('#token', TOKEN);
      await Promise.all([page.waitForURL(`${stack.url}/queues`), page.click('button[type=submit]')]);
      const cookies = await page.context().cookies();
      expect(cookies.find((c) => c.name === 'mcb_console_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });

      // 4. The failed list shows the job with its reason.
      await page.goto(`${stack.url}/queues/queue/callbacks?status=failed`);
      await page.getByText(jobId).first().waitFor({ timeout: 15_000 });
      await page.getByText(/HTTP 500/).first().waitFor();

      // 5. Fix the cause, then retry from the job's card.
      stack.platform.failNext(merchantOrderNo, 0, 500);
      // The card's first action button (an icon) is its retry.
      await page.getByText(jobId).first().locator('xpath=following::button[1]').click();
      const confirm = page.getByRole('button', { name: /^(retry|confirm|yes)$/i }).last();
      if (await confirm.isVisible().catch(() => false)) await confirm.click();

      // 6. The worker replays it: credited, once.
      await waitFor(async () => (await ledgerOf(env.db.db, merchantOrderNo)).order.status === 'credited', { timeoutMs: 15_000, message: 'order not credited' });
      expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toHaveLength(1);
      await page.goto(`${stack.url}/queues/queue/callbacks?status=completed`);
      await page.getByText(jobId).first().waitFor({ timeout: 15_000 });
      mkdirSync(path.dirname(ARTIFACT), { recursive: true });
      await page.screenshot({ path: ARTIFACT, fullPage: true });
    } finally {
      await page.close();
    }
  }, 60_000);
});
