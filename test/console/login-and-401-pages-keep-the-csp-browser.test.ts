import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '@mcb/testkit';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, SERVICE, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

const env = useTestEnv();
let stack: OpsStack;
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchBrowser();
  stack = await startOpsStack(env, { listen: true, consoleDeps: { operators: [...OPERATORS, SERVICE] } });
});
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

/** A page at `width`, collecting what the browser says about the Content-Security-Policy. */
async function pageAt(width: number): Promise<{ page: Page; violations: string[] }> {
  const page = await browser!.newPage({ viewport: { width, height: 760 } });
  const violations: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
  });
  return { page, violations };
}

/** The page's globals as this test reads them (the tests compile without the DOM library). */
type Win = {
  document: { documentElement: { scrollWidth: number } };
  innerWidth: number;
  getComputedStyle(e: unknown): { maxWidth: string };
};
const fitsWidth = (page: Page) =>
  page.evaluate(
    () =>
      (globalThis as unknown as Win).document.documentElement.scrollWidth <= (globalThis as unknown as Win).innerWidth,
  );

describe('the login and 401 pages', () => {
  for (const width of [1366, 375]) {
    it(`are styled by the console's stylesheet under the pages' CSP, fit ${width} px, and refuse a service client`, async () => {
      const { page, violations } = await pageAt(width);
      try {
        const res = await page.goto(`${stack.url}/search`);
        expect(res!.status()).toBe(401);
        expect(res!.headers()['content-security-policy']).toContain("default-src 'none'");
        // The stylesheet applied (an inline <style> would be blocked by style-src 'self').
        expect(
          await page.locator('main.bare').evaluate((m) => (globalThis as unknown as Win).getComputedStyle(m).maxWidth),
        ).toBe('416px');
        await page.screenshot({ path: path.join(ARTIFACTS, `console-401-${width}.png`), fullPage: true });
        await page.click('#login');
        await page.locator('#token').waitFor();
        expect(page.url()).toContain('/login?next=%2Fsearch');

        await page.fill('#token', TOKENS.service);
        await page.keyboard.press('Enter');
        await page.getByRole('alert').waitFor();
        expect(await page.getByRole('alert').innerText()).toMatch(/service client: it works with the API only/);
        expect(await fitsWidth(page)).toBe(true);
        await page.screenshot({ path: path.join(ARTIFACTS, `console-login-refused-${width}.png`), fullPage: true });

        await page.fill('#token', TOKENS.operator);
        await Promise.all([page.waitForURL(`${stack.url}/search`), page.keyboard.press('Enter')]);
        expect(violations).toEqual([]);
      } finally {
        await page.close();
      }
    });
  }
});
