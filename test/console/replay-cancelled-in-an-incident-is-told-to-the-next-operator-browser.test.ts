import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, replays } from '@mcb/core/db';
import { callbackJobOptions, type CallbackJobInput } from '@mcb/core/queue';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq, inArray } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// The incident of issue 49, walked in a browser: callbacks fail for good while the database is read-only; an operator
// dry-runs the failed jobs and starts a replay from the dry run, then cancels it with a reason; a second person (a
// viewer, who may not read the audit) reads who cancelled it and why on the replay's page and in the list, at 1366 and
// 375 px. Then the forgery, handled and cleared: a callback for an applied pair with another amount lands in review;
// the landing counts 1 suspected forgery; the operator follows it to the order, reads what happened and the key
// rotation, and dismisses it with a note; the count is back to 0 and the viewer reads who dismissed it and why.

const env = useTestEnv();
let stack: OpsStack;
let browser: Browser | undefined;
const AMOUNT = '33.00';

beforeAll(async () => {
  browser = await launchBrowser();
  stack = await startOpsStack(env, {
    worker: { concurrency: 4 },
    listen: true,
    consoleDeps: { operators: OPERATORS },
  });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

const database = () => new URL(env.databaseUrl).pathname.slice(1);

/** Sessions keep the default they started with: end every other one of this database, so the pool reconnects. */
async function reconnectAll(admin: { query: (sql: string, values: unknown[]) => Promise<unknown> }) {
  await admin.query(
    `select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`,
    [database()],
  );
}

/** `n` pay-ins whose callbacks arrive while the database refuses every write (25006), and so fail for good. */
async function failInReadOnlyWindow(n: number) {
  const made = [];
  for (let i = 0; i < n; i++) {
    const no = uid();
    const o = { merchantOrderNo: `MO-RO-${no}`, orderNo: `P-RO-${no}` };
    await createOrder(env.db.db, { ...o, kind: 'payin', amount: AMOUNT });
    stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: AMOUNT }));
    made.push(o);
  }
  // 1. The window opens: new sessions are read-only, and every session but this test's own is made new.
  const admin = await env.db.pool.connect();
  await admin.query(`alter database "${database()}" set default_transaction_read_only = on`);
  await reconnectAll(admin);
  const jobIds: string[] = [];
  try {
    for (const o of made) jobIds.push(await stack.add(payinEvent({ ...o, fiatAmount: AMOUNT }), 1));
    for (const id of jobIds)
      await waitFor(async () => (await stack.queue.getJobState(id)) === 'failed' || undefined, {
        timeoutMs: 40_000,
        message: `job ${id} did not fail in the read-only window (${await stack.queue.getJobState(id)})`,
      });
  } finally {
    // 2. The window closes.
    await admin.query(`alter database "${database()}" reset default_transaction_read_only`, []);
    await reconnectAll(admin);
    admin.release();
  }
  // 3. The worker's failed rows, kept while Postgres refused them, are written once it takes writes again.
  await waitFor(
    async () => {
      const rows = await env.db.db
        .select()
        .from(callbackArrivals)
        .where(and(inArray(callbackArrivals.jobId, jobIds), eq(callbackArrivals.status, 'failed')));
      return rows.length === n || undefined;
    },
    { timeoutMs: 30_000, message: 'the failed rows were not written after the window' },
  );
  return made;
}

type PayinInput = Extract<CallbackJobInput, { kind: 'payin' }>;

/** A pay-in credited 50.00, then a forged callback for the same pair claiming 9,999.99 (ingest's id for a variant). */
async function forgeryOfAnAppliedPair() {
  const no = uid();
  const [merchantOrderNo, orderNo] = [`MO-FI-${no}`, `P-FI-${no}`];
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '50.00' });
  stack.platform.setOrder(platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"50.00"' }));
  const genuine = payinEvent({ orderNo, merchantOrderNo, fiatAmount: '50.00' }) as PayinInput;
  const id = await stack.add(genuine);
  await waitFor(async () => (await stack.queue.getJobState(id)) === 'completed', { message: 'not credited' });
  const forged = `${id}-forged`;
  await stack.queue.add('payin', { ...genuine, fiatAmount: '9999.99' }, { ...callbackJobOptions, jobId: forged });
  await waitFor(
    async () => {
      const [row] = await env.db.db.select().from(callbackArrivals).where(eq(callbackArrivals.jobId, forged));
      return row?.status === 'review' || undefined;
    },
    { timeoutMs: 30_000, message: 'the forged callback did not land in review' },
  );
  return { merchantOrderNo };
}

const shot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(ARTIFACTS, `incident-replay-${name}.png`), fullPage: true });

/** Nothing wider than the window: the page does not scroll sideways. */
async function fitsWidth(page: Page, width: number) {
  // A string, evaluated in the page: this project's TypeScript has no DOM types.
  expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
}

async function logIn(page: Page, token: string, next: string) {
  await page.goto(`${stack.url}/login?next=${encodeURIComponent(next)}`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${stack.url}${next}`), page.click('button[type=submit]')]);
}

describe('a replay in an incident, in a browser', () => {
  it('jobs fail in a read-only window; an operator dry-runs, starts and cancels with a reason; a viewer reads who and why', async () => {
    const failed = await failInReadOnlyWindow(6);
    const filter = `amountMin=${AMOUNT}&amountMax=${AMOUNT}`;

    // 4. The operator: dry run, then the start form (its plan posted back with it), at 1 job a second.
    const otto = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    try {
      await logIn(otto, TOKENS.operator, `/replays/new?${filter}&dryRun=1`);
      await otto.getByRole('heading', { name: `Dry run: ${failed.length} failed job(s) match` }).waitFor();
      expect(await otto.locator('td[data-class=willApply]').textContent()).toBe(String(failed.length));
      await shot(otto, '1-dry-run-1366');
      await otto.getByLabel(/^Reason/).fill('DB read-only 10:02-10:04; Get order confirms them');
      await otto.getByLabel(/Jobs per second/).fill('1');
      await Promise.all([
        otto.waitForURL(/\/replays\/\d+\?ok=/),
        otto.getByRole('button', { name: `Start replay of ${failed.length} job(s)` }).click(),
      ]);
      const id = Number(/\/replays\/(\d+)/.exec(otto.url())![1]);
      await otto.locator('[data-status=running]').waitFor();
      expect((await env.db.db.select().from(replays).where(eq(replays.id, id)))[0]).toMatchObject({
        total: failed.length,
      });
      // 5. Cancelled with a reason before it is through.
      await otto.getByLabel(/^Reason/).fill('wrong window: the 10:04 batch is a forgery suspect, hold it');
      await Promise.all([
        otto.waitForURL(/\?ok=replay/),
        otto.getByRole('button', { name: `Cancel replay ${id}` }).click(),
      ]);
      await otto.locator('[data-status=cancelled]').waitFor();
      await shot(otto, '2-cancelled-1366');

      // 6. Someone else, later, who cannot read the audit: who cancelled it, and why, at desk and phone widths.
      for (const width of [1366, 375]) {
        const vera = await browser!.newPage({ viewport: { width, height: 900 } });
        try {
          await logIn(vera, TOKENS.viewer, '/replays');
          const row = vera.getByRole('row', { name: new RegExp(`Replay ${id}\\b`) });
          await expect(
            row.getByText('otto.operator@example.com: wrong window', { exact: false }).isVisible(),
          ).resolves.toBe(true);
          await shot(vera, `3-list-viewer-${width}`);
          await vera.getByRole('link', { name: `Replay ${id}` }).click();
          await vera.locator('[data-status=cancelled]').waitFor();
          expect(await vera.locator('[data-ended-by]').textContent()).toBe('otto.operator@example.com');
          expect(await vera.locator('[data-end-reason]').textContent()).toBe(
            'wrong window: the 10:04 batch is a forgery suspect, hold it',
          );
          expect(await vera.locator('[data-ended-by]').isVisible()).toBe(true);
          // No cancel control, no "Dry run the rest" for a viewer; the audit is not theirs to read.
          expect(await vera.getByRole('button', { name: /Cancel replay/ }).count()).toBe(0);
          await shot(vera, `4-replay-viewer-${width}`);
          const audit = await vera.goto(`${stack.url}/audit?operator=otto.operator@example.com`);
          expect(audit?.status()).not.toBe(500);
          expect(await vera.content()).not.toContain('wrong window: the 10:04 batch');
        } finally {
          await vera.close();
        }
      }

      // 7. The operator continues: "Dry run the rest" names the cancelled replay and keeps its reason.
      await otto.getByRole('link', { name: 'Dry run the rest' }).click();
      await otto.locator(`[data-rest-of="${id}"]`).waitFor();
      expect(await otto.getByLabel(/^Reason/).inputValue()).toBe(
        `DB read-only 10:02-10:04; Get order confirms them (the rest of replay ${id})`,
      );
      await shot(otto, '5-rest-1366');
    } finally {
      await otto.close();
    }
  }, 180_000);

  it('a forgery lands: the landing counts it; the operator reads it, dismisses it with a note; the count clears; a viewer reads who and why', async () => {
    const { merchantOrderNo } = await forgeryOfAnAppliedPair();
    const note = 'forged: 9,999.99 claimed, 50.00 credited; key pair rotated (merchant-2026-11)';
    // Seen at 375 px first (the landing and the order's review), then acted on at 1366.
    for (const width of [375, 1366]) {
      const otto = await browser!.newPage({ viewport: { width, height: 900 } });
      try {
        await logIn(otto, TOKENS.operator, '/search');
        // 8. The landing counts it; its link is the Callbacks page's preset, which lists the same one.
        const count = otto.locator('[data-count=forgeries]');
        expect(await count.textContent()).toBe('1');
        expect(await otto.locator('a', { has: count }).innerText()).toBe('1 suspected forgery');
        await shot(otto, `6-landing-forgery-${width}`);
        await fitsWidth(otto, width);
        await otto.locator('a', { has: count }).click();
        await otto.getByRole('heading', { name: '1 callback(s) match' }).waitFor();
        await otto.getByRole('link', { name: merchantOrderNo }).click();
        // 9. The order page: the review says what happened and the next step, the key rotation with its command.
        const story = otto.locator('.story-forgery');
        expect(await story.innerText()).toMatch(
          /Suspected forgery\. What happened: The customer was credited 50\.00 \(receipt \d+\); another callback claimed 9,999\.99 and was not paid\.[\s\S]*Next step: Rotate our callback key pair[\s\S]*pnpm cli keys generate --out keys --name merchant-\d{4}-\d{2}/,
        );
        await shot(otto, `7-order-forgery-${width}`);
        await fitsWidth(otto, width);
        if (width === 375) continue;
        // 10. Dismissed through the page's form, with the note.
        await otto.getByLabel(/Why dismiss/).fill(note);
        await Promise.all([
          otto.waitForURL(/[?&]ok=/),
          otto.getByRole('button', { name: /^Dismiss review \d+$/ }).click(),
        ]);
        expect(await otto.locator('.flash').first().innerText()).toMatch(/Review \d+ dismissed/);
        await otto.goto(`${stack.url}/search`);
        expect(await otto.locator('[data-count=forgeries]').textContent()).toBe('0');
        await otto.locator('a', { has: otto.locator('[data-count=forgeries]') }).click();
        await otto.getByRole('heading', { name: '0 callback(s) match' }).waitFor();
      } finally {
        await otto.close();
      }
    }

    // 11. The viewer, later: the count is 0, and the review says it was dismissed, by whom, and the note.
    for (const width of [1366, 375]) {
      const vera = await browser!.newPage({ viewport: { width, height: 900 } });
      try {
        await logIn(vera, TOKENS.viewer, '/search');
        expect(await vera.locator('[data-count=forgeries]').textContent()).toBe('0');
        await shot(vera, `8-landing-cleared-viewer-${width}`);
        await vera.goto(`${stack.url}/reviews?status=dismissed&merchantOrderNo=${merchantOrderNo}`);
        const card = vera.locator('article.card');
        expect(await card.count()).toBe(1);
        expect(await card.locator('[data-closed-by]').textContent()).toBe('otto.operator@example.com');
        expect(await card.innerText()).toContain(`Note\n${note}`);
        expect(await card.innerText()).toContain('Suspected forgery. What happened:');
        expect(await vera.getByRole('button', { name: /Dismiss review/ }).count()).toBe(0);
        await shot(vera, `9-review-dismissed-viewer-${width}`);
        await fitsWidth(vera, width);
      } finally {
        await vera.close();
      }
    }
  }, 180_000);
});
