import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, operatorActions } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
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

/** `n` pay-ins of `amount` whose callback failed for good (Get order 500), then the platform is fixed. */
async function failedPayins(n: number, amount: string) {
  const made = [];
  for (let i = 0; i < n; i++) {
    const no = uid();
    const o = { merchantOrderNo: `MO-WZ-${no}`, orderNo: `P-WZ-${no}` };
    await createOrder(env.db.db, { ...o, kind: 'payin', amount });
    stack.platform.failNext(o.merchantOrderNo, 1, 500);
    made.push({ ...o, jobId: await stack.add(payinEvent({ ...o, fiatAmount: amount }), 1) });
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
    stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: amount }));
  }
  return made;
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(ARTIFACTS, `replay-wizard-${name}.png`), fullPage: true });

async function dryRun(page: Page, amount: string) {
  await page.goto(`${stack.url}/replays/new`);
  await page.getByLabel('Last error code').fill('PLATFORM_HTTP_ERROR');
  await page.getByLabel('Amount from').fill(amount);
  await page.getByLabel('Amount to').fill(amount);
  // Keyboard: Enter in a field submits the dry run.
  await Promise.all([page.waitForURL(/\/replays\/new\?.*dryRun=1/), page.getByLabel('Amount to').press('Enter')]);
}

describe('the replay wizard in a browser', () => {
  it('an operator dry-runs a filter, reads the table, starts with a reason, watches it finish; cancels a slow one', async () => {
    const quick = await failedPayins(3, '11.00');
    const slow = await failedPayins(12, '22.00');
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      await page.goto(`${stack.url}/login?next=/replays`);
      await page.fill('#token', TOKENS.operator);
      await Promise.all([page.waitForURL(`${stack.url}/replays`), page.click('button[type=submit]')]);
      await page.getByText('otto.operator@example.com').first().waitFor();

      // Filter → dry-run table.
      await page.getByRole('link', { name: /New replay by filter/ }).click();
      await dryRun(page, '11.00');
      await page.getByRole('heading', { name: 'Dry run: 3 failed job(s) match' }).waitFor();
      expect(await page.locator('td[data-class=willApply]').textContent()).toBe('3');
      expect(await page.locator('td[data-class=alreadyApplied]').textContent()).toBe('0');
      for (const o of quick) await page.getByRole('link', { name: o.merchantOrderNo }).waitFor();
      await shot(page, '1-dry-run');

      // Reason → start → progress, until it finishes (the page refreshes itself).
      await page.getByLabel(/^Reason/).fill('Get order was down 10:00-10:20; customers paid');
      await page.getByLabel(/Jobs per second/).fill('3');
      await Promise.all([
        page.waitForURL(/\/replays\/\d+\?ok=/),
        page.getByRole('button', { name: 'Start replay of 3 job(s)' }).click(),
      ]);
      await page.getByText(/replay \d+ started: 3 job\(s\) at 3 per second/).waitFor();
      await page.locator('[data-status=finished]').waitFor({ timeout: 20_000 });
      expect(await page.locator('[data-replayed]').textContent()).toBe('3');
      await shot(page, '2-finished');
      for (const o of quick) {
        await waitFor(async () => (await ledgerOf(env.db.db, o.merchantOrderNo)).order.status === 'credited', {
          timeoutMs: 15_000,
        });
        expect((await ledgerOf(env.db.db, o.merchantOrderNo)).ledger).toHaveLength(1);
      }

      // A slow one (1 per second), cancelled from its page with a reason.
      await dryRun(page, '22.00');
      expect(await page.locator('td[data-class=willApply]').textContent()).toBe('12');
      await page.getByLabel(/^Reason/).fill('slow replay of the 22.00 batch');
      await page.getByLabel(/Jobs per second/).fill('1');
      await Promise.all([
        page.waitForURL(/\/replays\/\d+\?ok=/),
        page.getByRole('button', { name: 'Start replay of 12 job(s)' }).click(),
      ]);
      const id = /\/replays\/(\d+)/.exec(page.url())![1];
      await page.locator('[data-status=running]').waitFor();
      await shot(page, '3-running');
      await page.getByLabel(/^Reason/).fill('wrong batch: stop');
      await Promise.all([
        page.waitForURL(/\?ok=replay/),
        page.getByRole('button', { name: `Cancel replay ${id}` }).click(),
      ]);
      await page.locator('[data-status=cancelled]').waitFor();
      await page.getByText(new RegExp(`replay ${id} cancelled after \\d+ of 12 job\\(s\\)`)).waitFor();
      await shot(page, '4-cancelled');
      const replayed = Number(await page.locator('[data-replayed]').textContent());
      expect(replayed).toBeLessThan(12);

      // The replays list, and the audit trail names the operator and the reasons.
      await page.goto(`${stack.url}/replays`);
      await page.getByRole('link', { name: `Replay ${id}` }).waitFor();
      await shot(page, '5-list');
      const audit = await env.db.db
        .select()
        .from(operatorActions)
        .where(eq(operatorActions.operator, 'otto.operator@example.com'));
      expect(audit.map((a) => [a.action, a.outcome, a.reason])).toEqual([
        ['replays.start', 'started', 'Get order was down 10:00-10:20; customers paid'],
        ['replays.start', 'started', 'slow replay of the 22.00 batch'],
        ['replays.cancel', 'cancelled', 'wrong batch: stop'],
      ]);
      expect(slow).toHaveLength(12);
    } finally {
      await page.close();
    }
  }, 120_000);
});
