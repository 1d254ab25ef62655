import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorActions } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ledgerOf, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

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

/** A pay-in whose Get order keeps failing: its job exhausts its attempts and fails. */
async function failedPayin() {
  const no = uid();
  const [merchantOrderNo, orderNo] = [`MO-${no}`, `P-${no}`];
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '250.00' });
  stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '250.00' }));
  stack.platform.failNext(merchantOrderNo, 1_000, 500);
  const jobId = await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '250.00' }), 2);
  await waitFor(async () => (await stack.queue.getJobState(jobId)) === 'failed', { message: 'job did not fail' });
  return { merchantOrderNo, orderNo, jobId };
}

async function logIn(page: Page, token: string, next: string) {
  await page.goto(`${stack.url}/login?next=${encodeURIComponent(next)}`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${stack.url}${next}`), page.click('button[type=submit]')]);
}

/** The labels of the board's visible buttons (board-guard.js names icon buttons after their icon). */
const visibleButtons = (page: Page) =>
  page.$$eval('button', (els) =>
    els
      .filter((e) => (e as unknown as { offsetParent: unknown }).offsetParent !== null)
      .map((e) => (e.getAttribute('aria-label') || e.textContent || '').trim()),
  );

describe('the dashboard in a browser', () => {
  it('an operator logs in, finds the failed job by its order number, retries it with a reason, and the order is credited once', async () => {
    const { merchantOrderNo, jobId } = await failedPayin();
    const page = await browser!.newPage();
    try {
      // 1. Without a session the dashboard answers 401 and links to the login form.
      const denied = await page.goto(`${stack.url}/queues`);
      expect(denied?.status()).toBe(401);
      await page.click('#login');
      await page.fill('#token', TOKENS.operator);
      await Promise.all([page.waitForURL(`${stack.url}/queues`), page.click('button[type=submit]')]);
      const cookies = await page.context().cookies();
      expect(cookies.find((c) => c.name === 'mcb_console_session')).toMatchObject({
        httpOnly: true,
        sameSite: 'Strict',
      });

      // 2. The failed list shows the job, titled with our order number, and its reason; no refused control is offered.
      await page.goto(`${stack.url}/queues/queue/callbacks?status=failed`);
      await page.getByText(merchantOrderNo).first().waitFor({ timeout: 15_000 });
      await page
        .getByText(/HTTP 500/)
        .first()
        .waitFor();
      const buttons = await visibleButtons(page);
      expect(buttons).toContain('Retry');
      for (const refused of ['Retry all', 'Clean all', 'Duplicate', 'Edit', 'Delete'])
        expect(buttons).not.toContain(refused);
      // Bulk retry is the replay wizard's (dry run, rate, count and jobs recorded): the board points there.
      await page.locator('#mcb-replay-wizard a[href="/replays/new"]').waitFor({ timeout: 15_000 });

      // 3. Fix the cause, then retry from the card: the page asks why, and sends it with the action.
      stack.platform.failNext(merchantOrderNo, 0, 500);
      page.on(
        'dialog',
        (d) => void (d.type() === 'prompt' ? d.accept('customer paid at 02:50; Get order is back') : d.accept()),
      );
      await page
        .getByText(merchantOrderNo)
        .first()
        .locator('xpath=preceding::button[@aria-label="Retry"][1] | following::button[@aria-label="Retry"][1]')
        .first()
        .click();
      const confirm = page.getByRole('button', { name: /^(retry|confirm|yes)$/i }).last();
      if (await confirm.isVisible().catch(() => false)) await confirm.click();

      // 4. The worker replays it: credited, once; the audit trail names the operator and the reason.
      await waitFor(async () => (await ledgerOf(env.db.db, merchantOrderNo)).order.status === 'credited', {
        timeoutMs: 15_000,
        message: 'order not credited',
      });
      expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger).toHaveLength(1);
      const [audit] = await waitFor(async () => {
        const rows = await env.db.db
          .select()
          .from(operatorActions)
          .where(eq(operatorActions.target, `job:callbacks/${jobId}`));
        return rows.length ? rows : undefined;
      });
      expect(audit).toMatchObject({
        operator: 'otto.operator@example.com',
        action: 'queue.retry',
        reason: 'customer paid at 02:50; Get order is back',
        outcome: 'done',
      });
      await page.goto(`${stack.url}/queues/queue/callbacks?status=completed`);
      await page.getByText(merchantOrderNo).first().waitFor({ timeout: 15_000 });
      // Retry-all is for failed jobs only: not offered on the completed list (one completed job may be retried).
      await waitFor(async () => !(await visibleButtons(page)).includes('Retry all'), {
        message: 'Retry all still offered on the completed list',
      });
      expect(await visibleButtons(page)).toContain('Retry');
      await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-retry.png'), fullPage: true });

      // 5. An action the server refuses is not silent: the page shows the refusal.
      const alert = page.waitForEvent('dialog', { predicate: (d) => d.type() === 'alert' });
      // As bull-board's own client sends it (XHR, through board-guard.js).
      await page.evaluate(
        `(() => { const x = new XMLHttpRequest(); x.open('PUT', 'api/queues/callbacks/${jobId}/clean'); x.send(); })()`,
      );
      expect((await alert).message()).toMatch(/^Refused \(403\): this dashboard action is disabled/);
    } finally {
      await page.close();
    }
  }, 90_000);

  it('a viewer sees the failed job but no action, and the retry answers 403', async () => {
    const { merchantOrderNo, jobId } = await failedPayin();
    const page = await browser!.newPage();
    try {
      await logIn(page, TOKENS.viewer, '/queues/queue/callbacks?status=failed');
      await page.getByText(merchantOrderNo).first().waitFor({ timeout: 15_000 });
      const buttons = await visibleButtons(page);
      for (const action of ['Retry', 'Retry all', 'Clean all', 'Duplicate', 'Edit', 'Delete'])
        expect(buttons).not.toContain(action);
      await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-viewer.png'), fullPage: true });
      // Sent anyway, as the page would: the server refuses it, naming the role it needs, and the page says so.
      const alerts: string[] = [];
      page.on('dialog', (d) => {
        if (d.type() === 'alert') alerts.push(d.message());
        void (d.type() === 'prompt' ? d.accept('just looking') : d.accept());
      });
      const status = await page.evaluate(
        async (id) => (await fetch(`api/queues/callbacks/${id}/retry`, { method: 'PUT' })).status,
        jobId,
      );
      expect(status).toBe(403);
      expect(alerts).toEqual([expect.stringMatching(/^Refused \(403\): queue\.retry needs the role operator/)]);
      expect(await stack.queue.getJobState(jobId)).toBe('failed');
    } finally {
      await page.close();
    }
  }, 60_000);

  it('the security headers leave the board and the pages working, and keep a same-site page from framing them', async () => {
    const { merchantOrderNo } = await failedPayin();
    for (const width of [1366, 375]) {
      const page = await browser!.newPage({ viewport: { width, height: 900 } });
      try {
        await logIn(page, TOKENS.viewer, '/search');
        // bull-board's page, with its scripts, under frame-ancestors 'none' and nosniff: it renders the job.
        const board = await page.goto(`${stack.url}/queues/queue/callbacks?status=failed`);
        expect(board?.headers()).toMatchObject({
          'x-frame-options': 'DENY',
          'x-content-type-options': 'nosniff',
          'content-security-policy': "frame-ancestors 'none'",
        });
        await page.getByText(merchantOrderNo).first().waitFor({ timeout: 15_000 });
        for (const action of ['Retry', 'Retry all', 'Clean all'])
          expect(await visibleButtons(page)).not.toContain(action);
        await page.screenshot({ path: path.join(ARTIFACTS, `dashboard-viewer-headers-${width}.png`), fullPage: true });
        // A console page: its own CSP with frame-ancestors merged in, and it renders.
        const order = await page.goto(`${stack.url}/orders/${merchantOrderNo}`);
        expect(order?.status()).toBe(200);
        expect(order?.headers()['content-security-policy']).toMatch(/^default-src 'none';.*frame-ancestors 'none'/);
        expect(order?.headers()['x-frame-options']).toBe('DENY');
        await page
          .getByRole('heading', { name: new RegExp(merchantOrderNo) })
          .first()
          .waitFor();
        await page.screenshot({ path: path.join(ARTIFACTS, `console-order-headers-${width}.png`), fullPage: true });
      } finally {
        await page.close();
      }
    }

    // Another port of the same host is the same site: the session cookie would go along with a framed request.
    const framer: Server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<!doctype html><title>framer</title><iframe id="f" src="${stack.url}/queues/queue/callbacks?status=failed" width="800" height="600"></iframe>`,
      );
    });
    await new Promise<void>((resolve) => framer.listen(0, '127.0.0.1', resolve));
    const page = await browser!.newPage();
    try {
      await logIn(page, TOKENS.viewer, '/search');
      const loaded = page.waitForResponse((r) => r.url().includes('/queues/queue/callbacks'));
      await page.goto(`http://127.0.0.1:${(framer.address() as AddressInfo).port}/`);
      expect((await loaded).status()).toBe(200);
      const frame = await (await page.$('#f'))!.contentFrame();
      // The browser refuses to show it: the frame holds an error page, not the board.
      const text = await frame!.evaluate('document.body ? document.body.innerText : ""').catch(() => '');
      expect(String(text)).not.toContain(merchantOrderNo);
      expect(String(text)).not.toMatch(/Callbacks/);
      await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-framed-refused.png') });
    } finally {
      await page.close();
      await new Promise((resolve) => framer.close(resolve));
    }
  }, 90_000);

  it('CONSOLE_TOKEN still logs in, as the admin named admin', async () => {
    const page = await browser!.newPage();
    try {
      await logIn(page, TOKEN, '/queues');
      const who = await page.evaluate(async () => (await fetch('/api/whoami')).json());
      expect(who).toEqual({ name: 'admin', role: 'admin', via: 'session' });
    } finally {
      await page.close();
    }
  }, 30_000);
});
