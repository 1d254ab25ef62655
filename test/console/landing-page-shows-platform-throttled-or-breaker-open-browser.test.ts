import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { createFleet, type Fleet } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv } from '@mcb/testkit';
import type { Browser, Page } from 'playwright-core';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { AUTH_LIMITS_OFF, MERCHANT_NO, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';
import { merchantKeys } from '@mcb/core/queue';

// The console's landing page (/search) says when Get order is held back for the whole fleet: the shared breaker is
// open, or the fleet asks beyond PLATFORM_MAX_RPS. The state is the workers' (Redis, under the queue prefix).
const env = useTestEnv();
let stack: OpsStack;
let browser: Browser | undefined;
let redis: Redis;
const fleets: Fleet[] = [];

beforeAll(async () => {
  browser = await launchBrowser();
  redis = createRedis(env.redisUrl, 'worker');
  const config = loadConfig(
    {
      MERCHANT_NO,
      PLATFORM_BASE_URL: 'http://127.0.0.1:9',
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: TOKEN,
      DATABASE_URL: env.databaseUrl,
      QUEUE_PREFIX: env.prefix,
      LOG_LEVEL: 'silent',
      ...AUTH_LIMITS_OFF,
    },
    'console',
  );
  stack = await startOpsStack(env, { listen: true, consoleDeps: { operators: OPERATORS, redis, config } });
});
afterAll(async () => {
  for (const f of fleets) await f.close();
  await browser?.close();
  await stack?.close();
  redis?.disconnect();
});

/** A worker's view of the fleet (its own connection, as a worker process has). */
function workerFleet(maxRps: number): Fleet {
  const connection = createRedis(env.redisUrl, 'worker');
  const fleet = createFleet({ redis: connection, keys: merchantKeys(env.prefix).fleet, maxRps });
  fleets.push({ ...fleet, close: async () => void (await fleet.close(), connection.disconnect()) });
  return fleet;
}

async function landing(page: Page, shot: string) {
  await page.goto(`${stack.url}/search`);
  await page.locator('h1').waitFor();
  for (const width of [1366, 375]) {
    await page.setViewportSize({ width, height: width === 375 ? 740 : 800 });
    await page.screenshot({ path: path.join(ARTIFACTS, `landing-${shot}-${width}.png`), fullPage: true });
  }
  return (await page.locator('main').innerText()).replace(/\s+/g, ' ');
}

describe('the landing page and the platform', () => {
  it('says nothing while Get order flows, and says so when the breaker is open or the fleet is throttled', async () => {
    const page = await browser!.newPage();
    try {
      await page.goto(`${stack.url}/login?next=${encodeURIComponent('/search')}`);
      await page.fill('#token', TOKENS.viewer);
      await Promise.all([page.waitForURL(`${stack.url}/search`), page.click('button[type=submit]')]);

      expect(await landing(page, 'normal')).not.toMatch(/Platform (breaker|throttled)/);

      const fleet = workerFleet(5);
      fleet.reportOpen();
      await expect
        .poll(async () => landing(page, 'breaker-open'), { timeout: 5000 })
        .toMatch(/Platform breaker open: Get order failed repeatedly/);
      await expect.poll(() => page.getByRole('status').first().isVisible()).toBe(true);

      fleet.reportClosed();
      // Twenty Get orders at once against a budget of 5 a second: the budget refuses most of the first reservation.
      await Promise.all(Array.from({ length: 20 }, () => fleet.take()));
      const text = await landing(page, 'throttled');
      expect(text).toMatch(/Platform throttled: the workers ask Get order faster than PLATFORM_MAX_RPS/);
      expect(text).not.toMatch(/breaker open/);
    } finally {
      await page.close();
    }
  }, 30_000);
});
