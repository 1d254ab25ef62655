import path from 'node:path';
import { callbackArrivals } from '@mcb/core/db';
import { useTestEnv } from '@mcb/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, launchBrowser } from '../../../test/console/helpers/browser.ts';
import { sha256Hex } from '../src/operators/directory.ts';
import { runCli } from './helpers/cli.ts';
import { TOKEN, WIRE_CATALOG } from './helpers/fake-platform.ts';
import { startMerchantsConsole, type MerchantsConsole } from './helpers/merchants-console.ts';

// An operator scoped to b, in Chromium, on the pages that list callbacks, and the admin beside: b's operator sees b's
// rows with their merchant, no field or row of a's; each page fits 1366 and 375 px.
const env = useTestEnv();
const B_TOKEN = 'b-operator-token-0123456789abcdef';
let stack: MerchantsConsole;
let url: string;
let browser: Browser | undefined;

beforeAll(async () => {
  stack = await startMerchantsConsole(env, {
    catalogs: { a: WIRE_CATALOG.currencies, b: WIRE_CATALOG.currencies },
    operators: [{ name: 'bo@b.example', role: 'operator', tokenSha256: sha256Hex(B_TOKEN), merchants: ['b'] }],
    listen: true,
  });
  ({ url } = stack);
  // Three failed callbacks of each merchant (the worker's rows).
  const now = Date.now();
  for (const [ref, no] of [
    ['a', 'M-A'],
    ['b', 'M-B'],
  ] as const) {
    for (let i = 1; i <= 3; i++) {
      const at = new Date(now - i * 60_000);
      await env.db.db.insert(callbackArrivals).values({
        jobId: `payin-P-${ref}-${i}-1`,
        merchantNo: no,
        kind: 'payin',
        orderNo: `P-${ref}-${i}`,
        state: 1,
        merchantOrderNo: `ORDER-${ref.toUpperCase()}-${i}`,
        amount: '1250.50',
        receivedAt: at,
        firstSeenAt: at,
        updatedAt: at,
        attempts: 6,
        status: 'failed',
        lastCode: 'PLATFORM_HTTP_ERROR',
        lastDetail: 'Get order answered 503',
      });
    }
  }
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

async function logIn(page: Page, token: string) {
  await page.goto(`${url}/login?next=/search`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(`${url}/search`), page.keyboard.press('Enter')]);
}

describe('the Callbacks page with two merchants', () => {
  for (const width of [1366, 375]) {
    it(`b's operator sees b's failed callbacks with their merchant, nothing of a (${width} px)`, async () => {
      const page = await browser!.newPage({ viewport: { width, height: 900 } });
      try {
        await logIn(page, B_TOKEN);
        await page.goto(`${url}/callbacks?status=failed`);
        const rows = page.locator('tbody tr[data-job]');
        expect(await rows.count()).toBe(3);
        expect(await page.locator('td[data-label="Merchant"]').allInnerTexts()).toEqual(['b', 'b', 'b']);
        const text = await page.locator('main').innerText();
        expect(text).not.toContain('ORDER-A');
        // The merchant field offers b's ref only ("every one" being b's, for this operator).
        expect(await page.locator('select[name="merchant"] option').allInnerTexts()).toEqual(['every one', 'b']);
        // A replay is one merchant's: the page offers b's dry run only, with b in its filter.
        const replay = page.locator('a', { hasText: 'Dry run a replay of' });
        expect(await replay.allInnerTexts()).toEqual(["Dry run a replay of b's failed jobs"]);
        expect(await replay.getAttribute('href')).toContain('merchant=b');
        expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
        await page.screenshot({
          path: path.join(ARTIFACTS, `console-callbacks-scoped-b-${width}.png`),
          fullPage: true,
        });
      } finally {
        await page.close();
      }
    });
  }

  it("the admin filters by merchant with the field; a's rows only", async () => {
    const page = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
    try {
      await logIn(page, TOKEN);
      await page.goto(`${url}/callbacks?status=failed`);
      expect(await page.locator('tbody tr[data-job]').count()).toBe(6);
      await page.selectOption('select[name="merchant"]', 'a');
      await Promise.all([page.waitForURL(/merchant=a/), page.click('button[type="submit"].primary')]);
      expect(new Set(await page.locator('td[data-label="Merchant"]').allInnerTexts())).toEqual(new Set(['a']));
      await page.screenshot({
        path: path.join(ARTIFACTS, 'console-callbacks-admin-merchant-a-1366.png'),
        fullPage: true,
      });
    } finally {
      await page.close();
    }
  });
});

/** `pnpm cli ...` as a child process, with the console's address and a token from the environment only. */
const cli = (token: string, ...args: string[]) => runCli(url, token, args);

describe('pnpm cli --merchant', () => {
  it("callbacks search lists one merchant's with a merchant column; b's operator is refused a's ref as unknown", async () => {
    const a = await cli(TOKEN, 'callbacks', 'search', '--status', 'failed', '--merchant', 'a');
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toMatch(/merchant/);
    expect(a.stdout).toContain('ORDER-A-1');
    expect(a.stdout).not.toContain('ORDER-B');
    const mine = await cli(B_TOKEN, 'callbacks', 'search', '--status', 'failed');
    expect(mine.stdout).toContain('ORDER-B-1');
    expect(mine.stdout).not.toContain('ORDER-A');
    const theirs = await cli(B_TOKEN, 'callbacks', 'search', '--status', 'failed', '--merchant', 'a');
    const unknown = await cli(B_TOKEN, 'callbacks', 'search', '--status', 'failed', '--merchant', 'zz');
    expect([theirs.code, unknown.code]).toEqual([1, 1]);
    expect(theirs.stderr).toContain('400');
    expect(theirs.stderr.replace('"a"', '"?"')).toBe(unknown.stderr.replace('"zz"', '"?"'));
  });

  it('replay list, reviews list and audit take --merchant', async () => {
    for (const args of [
      ['replay', 'list', '--merchant', 'b'],
      ['reviews', 'list', '--merchant', 'b'],
      ['audit', '--merchant', 'b'],
    ]) {
      const ok = await cli(TOKEN, ...args);
      expect(ok.code, `${args.join(' ')}: ${ok.stderr}`).toBe(0);
      const refused = await cli(B_TOKEN, ...args.slice(0, -1), 'a');
      expect(refused.code, args.join(' ')).toBe(1);
      expect(refused.stderr, args.join(' ')).toContain('unknown merchant');
    }
  });
});
