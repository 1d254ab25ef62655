import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { callbackJobOptions, type CallbackJobInput } from '@mcb/core/queue';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ledgerOf, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';

type PayinInput = Extract<CallbackJobInput, { kind: 'payin' }>;

// Issue 37: a callback for an applied pair with another amount is evidence of a forgery. The operator sees it on the
// order's page, in the timeline, with both values; GET /api/orders/{no} has the same row.
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

async function logIn(page: Page) {
  await page.goto(`${stack.url}/login?next=/search`);
  await page.fill('#token', TOKENS.operator);
  await Promise.all([page.waitForURL(`${stack.url}/search`), page.keyboard.press('Enter')]);
}

describe('a callback that differs from what was applied', () => {
  it('is a row of the order page timeline, with both amounts, at 1366 and 375 px', async () => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-FG-${no}`, `P-FG-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '50.00' });
    stack.platform.setOrder(
      platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"50.00"' }),
    );
    const genuine = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '50.00' }) as PayinInput;
    const id = await stack.add(genuine);
    await waitFor(async () => (await stack.queue.getJobState(id)) === 'completed', { message: 'not credited' });
    // The forgery: same pair, another amount (ingest queues it under the contract id plus a digest).
    await stack.queue.add(
      'payin',
      { ...genuine, fiatAmount: '9999.99' },
      { ...callbackJobOptions, jobId: `${id}-forged` },
    );
    const res = await waitFor(
      async () => {
        const r = await stack.app.inject({
          method: 'GET',
          url: `/api/orders/${merchantOrderNo}`,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        const body = r.json() as { timeline: { event: string; code: string | null; detail: string }[] };
        return body.timeline.some((e) => e.event === 'differs-from-applied') ? body : undefined;
      },
      { message: 'no differs-from-applied row in the order view' },
    );
    const row = res.timeline.find((e) => e.event === 'differs-from-applied')!;
    expect(row.code).toBe('VERIFY_DIFFERS_FROM_APPLIED');
    expect(row.detail).toMatch(/fiatAmount 9999\.99, applied 50\.00/);
    expect((await ledgerOf(env.db.db, merchantOrderNo)).ledger.map((l) => l.amount)).toEqual(['50.00']);

    for (const width of [1366, 375]) {
      const page = await browser!.newPage({ viewport: { width, height: 900 } });
      try {
        await logIn(page);
        await page.goto(`${stack.url}/orders/${merchantOrderNo}`);
        const cell = page.locator('tr', {
          has: page.locator('span.status', { hasText: 'differs from what was applied' }),
        });
        expect(await cell.count()).toBe(1);
        expect(await cell.innerText()).toMatch(/VERIFY_DIFFERS_FROM_APPLIED[\s\S]*9999\.99, applied 50\.00/);
        await page.screenshot({ path: path.join(ARTIFACTS, `console-order-forgery-${width}.png`), fullPage: true });
        // Issue 49: the review says in words what happened and the next step, the key rotation with its command.
        await page.goto(`${stack.url}/reviews?merchantOrderNo=${merchantOrderNo}`);
        const story = page.locator('.story-forgery');
        expect(await story.innerText()).toMatch(
          /Suspected forgery\. What happened: The customer was credited 50\.00 \(receipt \d+\); another callback claimed 9,999\.99 and was not paid\. Callbacks are not signed: whoever sent it holds our public key\.\s+Next step: Rotate our callback key pair[\s\S]*pnpm cli keys generate --out keys --name merchant-\d{4}-\d{2}/,
        );
        expect((await story.boundingBox())!.width).toBeLessThanOrEqual(width);
        await page.screenshot({ path: path.join(ARTIFACTS, `console-review-forgery-${width}.png`), fullPage: true });
      } finally {
        await page.close();
      }
    }
  });

  it('differing only in Quantity (Get order does not confirm it): a note naming both jobs, no review, at 1366 and 375 px', async () => {
    // Issue 48: a forgery with a made-up Quantity credited first; the genuine callback is a duplicate, not a suspect.
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-QN-${no}`, `P-QN-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '50.00' });
    stack.platform.setOrder(
      platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"50.00"' }),
    );
    const genuine = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '50.00' }) as PayinInput;
    const forgedId = await stack.add({ ...genuine, quantity: '999.00' });
    await waitFor(async () => (await stack.queue.getJobState(forgedId)) === 'completed', { message: 'not credited' });
    const genuineId = `${forgedId}-genuine`;
    await stack.queue.add('payin', genuine, { ...callbackJobOptions, jobId: genuineId });
    await waitFor(async () => (await stack.queue.getJobState(genuineId)) === 'completed', { message: 'not settled' });
    const res = await stack.app.inject({
      method: 'GET',
      url: `/api/orders/${merchantOrderNo}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const body = res.json() as { review: unknown; timeline: { event: string; jobId: string | null; detail: string }[] };
    expect(body.review).toBeNull();
    expect(body.timeline.filter((e) => e.event.startsWith('review') || e.event === 'differs-from-applied')).toEqual([]);
    expect(body.timeline.filter((e) => e.event === 'note')).toEqual([
      expect.objectContaining({
        jobId: genuineId,
        detail: expect.stringContaining(`job ${genuineId} claims Quantity 17.3 (applied: 999.00); receipt`),
      }),
    ]);
    expect(body.timeline.find((e) => e.event === 'note')!.detail).toContain(`applied from job ${forgedId}`);

    for (const width of [1366, 375]) {
      const page = await browser!.newPage({ viewport: { width, height: 900 } });
      try {
        await logIn(page);
        await page.goto(`${stack.url}/orders/${merchantOrderNo}`);
        const row = page.locator('tr', { has: page.locator('span.status', { hasText: 'note:' }) });
        expect(await row.count()).toBe(1);
        expect(await row.innerText()).toContain(`job ${genuineId} claims Quantity 17.3`);
        expect(await page.locator('span.status', { hasText: 'suspected forgery' }).count()).toBe(0);
        await page.screenshot({
          path: path.join(ARTIFACTS, `console-order-quantity-note-${width}.png`),
          fullPage: true,
        });
      } finally {
        await page.close();
      }
    }
  });
});
