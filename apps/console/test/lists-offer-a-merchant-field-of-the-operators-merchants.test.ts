import path from 'node:path';
import { replays, reviews } from '@mcb/core/db';
import { useTestEnv } from '@mcb/testkit';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, launchBrowser } from '../../../test/console/helpers/browser.ts';
import { sha256Hex } from '../src/operators/directory.ts';
import { AUTH, TOKEN, startConsole, type TestConsole } from './helpers/fake-platform.ts';
import { startMerchantsConsole, type MerchantsConsole } from './helpers/merchants-console.ts';

// With two merchants, the Reviews, Replays and Audit pages offer the Callbacks page's merchant field: "every one" and
// the operator's own merchants only; choosing one keeps the list to it. With one merchant there is no field.
const env = useTestEnv();
const B_TOKEN = 'b-operator-token-0123456789abcdef';
const B_OPERATOR = { authorization: `Bearer ${B_TOKEN}` };
const PAGES = ['/reviews', '/replays', '/audit'] as const;
let stack: MerchantsConsole;
/** A console of one merchant beside, on the same database: its pages have no merchant field. */
let single: TestConsole;

beforeAll(async () => {
  stack = await startMerchantsConsole(env, {
    operators: [{ name: 'bo@b.example', role: 'operator', tokenSha256: sha256Hex(B_TOKEN), merchants: ['b'] }],
    listen: true,
  });
  for (const [ref, merchantNo] of [
    ['a', 'M-A'],
    ['b', 'M-B'],
  ] as const) {
    await env.db.db.insert(reviews).values({
      kind: 'payin',
      merchantNo,
      orderNo: `P-R-${ref}`,
      state: 1,
      merchantOrderNo: `MO-R-${ref}`,
      reasonCode: 'VERIFY_AMOUNT_MISMATCH',
      reason: 'scripted',
      event: {},
    });
    await env.db.db.insert(replays).values({
      operator: 'admin',
      reason: `replay of ${ref}`,
      filter: { merchant: ref, status: ['failed'] },
      ratePerSecond: 1,
      status: 'finished',
      total: 0,
    });
    // An audited action of each merchant: an order registered by the admin.
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: AUTH,
      payload: { reason: 'setup', merchant: ref, merchantOrderNo: `MO-${ref}`, currency: 'PHP', amount: '10.00' },
    });
    expect(res.statusCode, res.body).toBe(201);
  }
  single = await startConsole({
    db: env.db,
    databaseUrl: env.databaseUrl,
    baseUrl: 'http://127.0.0.1:1',
    redis: { url: env.redisUrl, prefix: `${env.prefix}-single` },
  });
});

afterAll(async () => {
  await single?.close();
  await stack?.close();
});

/** The merchant field's options (value, label, selected) in a page, or undefined when it has none. */
function merchantField(body: string) {
  const select = /<select name="merchant">([\s\S]*?)<\/select>/.exec(body);
  if (!select) return undefined;
  return [...select[1]!.matchAll(/<option value="([^"]*)"( selected)?>([^<]*)<\/option>/g)].map((m) => ({
    value: m[1],
    label: m[3],
    selected: m[2] !== undefined,
  }));
}

/** The merchant column's cells of a page's table (Replays, Audit). */
const merchantCells = (body: string) => [...body.matchAll(/<td data-label="Merchant">([^<]*)<\/td>/g)].map((m) => m[1]);

const page = async (url: string, headers: Record<string, string>) => {
  const res = await stack.app.inject({ method: 'GET', url, headers: { ...headers, accept: 'text/html' } });
  expect(res.statusCode, `${url}: ${res.body.slice(0, 300)}`).toBe(200);
  return res.body;
};

describe('the merchant field of the Reviews, Replays and Audit pages', () => {
  it('is there with two merchants, and on no page with one', async () => {
    for (const url of PAGES) expect(merchantField(await page(url, AUTH)), url).toBeDefined();
    for (const url of ['/callbacks', ...PAGES]) {
      const res = await single.app.inject({ method: 'GET', url, headers: { ...AUTH, accept: 'text/html' } });
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).toContain('<form');
      expect(merchantField(res.body), url).toBeUndefined();
    }
  });

  it("offers every merchant to the admin and only b to b's operator ('every one' chosen), a's ref to b's operator is refused", async () => {
    for (const url of PAGES) {
      expect(merchantField(await page(url, AUTH)), url).toEqual([
        { value: '', label: 'every one', selected: false },
        { value: 'a', label: 'a', selected: false },
        { value: 'b', label: 'b', selected: false },
      ]);
      expect(merchantField(await page(url, B_OPERATOR)), url).toEqual([
        { value: '', label: 'every one', selected: false },
        { value: 'b', label: 'b', selected: false },
      ]);
    }
    // a's ref from b's operator is refused as an unknown one would be, and shows nothing of a.
    for (const url of PAGES) {
      const res = await stack.app.inject({
        method: 'GET',
        url: `${url}?merchant=a`,
        headers: { ...B_OPERATOR, accept: 'text/html' },
      });
      expect(res.statusCode, url).toBe(400);
      expect(res.body, url).not.toContain('MO-R-a');
      expect(res.body, url).not.toContain('replay of a');
    }
  });

  it('choosing a merchant keeps each list to it, and the field says which', async () => {
    const chosenA = [
      { value: '', label: 'every one', selected: false },
      { value: 'a', label: 'a', selected: true },
      { value: 'b', label: 'b', selected: false },
    ];
    const everyReview = await page('/reviews', AUTH);
    expect(everyReview).toContain('MO-R-a');
    expect(everyReview).toContain('MO-R-b');
    const reviewsOfA = await page('/reviews?merchant=a', AUTH);
    expect(merchantField(reviewsOfA)).toEqual(chosenA);
    expect(reviewsOfA).toContain('MO-R-a');
    expect(reviewsOfA).not.toContain('MO-R-b');

    expect(new Set(merchantCells(await page('/replays', AUTH)))).toEqual(new Set(['a', 'b']));
    const replaysOfA = await page('/replays?merchant=a', AUTH);
    expect(merchantField(replaysOfA)).toEqual(chosenA);
    expect(merchantCells(replaysOfA)).toEqual(['a']);

    expect(new Set(merchantCells(await page('/audit', AUTH)))).toEqual(new Set(['a', 'b']));
    const auditOfA = await page('/audit?merchant=a', AUTH);
    expect(merchantField(auditOfA)).toEqual(chosenA);
    expect(new Set(merchantCells(auditOfA))).toEqual(new Set(['a']));
    expect(auditOfA).toContain('MO-a');
    expect(auditOfA).not.toContain('MO-b');
  });
});

describe('in Chromium', () => {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function logIn(page: Page, token: string, next: string) {
    await page.goto(`${stack.url}/login?next=${encodeURIComponent(next)}`);
    await page.fill('#token', token);
    await Promise.all([page.waitForURL(`${stack.url}${next}`), page.keyboard.press('Enter')]);
  }

  for (const width of [1366, 375]) {
    it(`the admin chooses merchant a on the Audit page: a's rows only, and it, Reviews and Replays fit ${width} px`, async () => {
      const page = await browser!.newPage({ viewport: { width, height: 900 } });
      try {
        await logIn(page, TOKEN, '/audit');
        expect(new Set(await page.locator('td[data-label="Merchant"]').allInnerTexts())).toEqual(new Set(['a', 'b']));
        await page.selectOption('select[name="merchant"]', 'a');
        await Promise.all([page.waitForURL(/merchant=a/), page.click('form[role="search"] button[type="submit"]')]);
        expect(new Set(await page.locator('td[data-label="Merchant"]').allInnerTexts())).toEqual(new Set(['a']));
        expect(await page.locator('select[name="merchant"]').inputValue()).toBe('a');
        expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
        await page.screenshot({ path: path.join(ARTIFACTS, `console-audit-merchant-a-${width}.png`), fullPage: true });
        // The Reviews and Replays pages with a chosen: the field says so, and they fit too.
        for (const list of ['reviews', 'replays']) {
          await page.goto(`${stack.url}/${list}?merchant=a`);
          expect(await page.locator('select[name="merchant"]').inputValue(), list).toBe('a');
          expect(await page.evaluate<number>('document.documentElement.scrollWidth'), list).toBeLessThanOrEqual(width);
          await page.screenshot({
            path: path.join(ARTIFACTS, `console-${list}-merchant-a-${width}.png`),
            fullPage: true,
          });
        }
      } finally {
        await page.close();
      }
    });
  }
});
