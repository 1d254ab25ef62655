import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '@mcb/core/config';
import { callbackArrivals, merchantPauses } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient, type PlatformClient } from '@mcb/core/platform';
import { merchantKeys } from '@mcb/core/queue';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv, writeMerchantsFile } from '@mcb/testkit';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../apps/console/src/app.ts';
import { merchantQueues, type MerchantQueues } from '../../apps/console/src/callbacks/merchant-queues.ts';
import { createLaneSnapshot, type LaneSnapshotWriter } from '../../apps/worker/src/lane-snapshot.ts';
import { AUTH_LIMITS_OFF, TOKEN } from '../../apps/console/test/helpers/fake-platform.ts';
import { OPERATORS, TOKENS } from '../../apps/console/test/helpers/operators.ts';
import { ARTIFACTS, launchBrowser } from './helpers/browser.ts';

// The merchants page and a merchant's 24-hour picture as a person sees them, at 1366 and 375 px: no horizontal
// overflow, the figures and the charts readable, nothing run but the page (the CSP stays `default-src 'none'`).
const env = useTestEnv();
const logger = createLogger({ name: 'merchants-browser-test', level: 'silent' });
const file = writeMerchantsFile([
  { ref: 'brand-east', merchantNo: 'M-EAST-0001', getOrderRps: 40, weight: 2 },
  { ref: 'brand-west', merchantNo: 'M-WEST-0002' },
]);
let browser: Browser | undefined;
let redis: Redis;
let queues: MerchantQueues;
let clients: PlatformClient[] = [];
let app: FastifyInstance;
let url: string;
let snapshot: LaneSnapshotWriter;

/** A day of traffic for brand-east: a daily wave of callbacks, credited 0.3-2.5 s later, a few failing at night. */
async function dayOfTraffic() {
  const now = Date.now();
  const rows = [];
  for (let back = 1440; back >= 1; back--) {
    const minute = Math.floor(now / 60_000) * 60_000 - back * 60_000;
    const n = Math.round(3 + 2.5 * Math.sin((back / 1440) * 2 * Math.PI * 2));
    for (let i = 0; i < n; i++) {
      const receivedAt = new Date(minute + i * 7000);
      const wait = 300 + ((back * 37 + i * 11) % 2200) + (back > 300 && back < 360 ? 9000 : 0);
      const failed = back % 97 === 0 && i === 0;
      rows.push({
        jobId: `payin-E${back}-${i}`,
        merchantNo: 'M-EAST-0001',
        kind: 'payin' as const,
        orderNo: `E${back}-${i}`,
        state: 1,
        merchantOrderNo: `MO-E${back}-${i}`,
        receivedAt,
        firstSeenAt: receivedAt,
        updatedAt: new Date(receivedAt.getTime() + wait),
        attempts: failed ? 8 : 1,
        status: failed ? ('failed' as const) : ('applied' as const),
        outcome: failed ? null : 'credited',
      });
    }
  }
  for (let i = 0; i < rows.length; i += 1000) await env.db.db.insert(callbackArrivals).values(rows.slice(i, i + 1000));
}

beforeAll(async () => {
  browser = await launchBrowser();
  const config = loadConfig(
    {
      MERCHANTS_FILE: file.path,
      PLATFORM_BASE_URL: 'http://127.0.0.1:9',
      PLATFORM_ALLOW_HTTP: 'true',
      PLATFORM_MAX_RPS: '25',
      CONSOLE_TOKEN: TOKEN,
      CONSOLE_SESSION_SECRET: 'test-console-session-secret-0123456789abcdef',
      DATABASE_URL: env.databaseUrl,
      QUEUE_PREFIX: env.prefix,
      LOG_LEVEL: 'silent',
      ...AUTH_LIMITS_OFF,
    },
    'console',
  );
  redis = createRedis(env.redisUrl, 'producer');
  queues = merchantQueues(
    config.merchants,
    env.prefix,
    (name, prefix) => new Queue(name, { connection: redis, prefix }),
  );
  const platforms = new Map(
    config.merchants.map((m) => [
      m.ref,
      createPlatformClient({ baseUrl: 'http://127.0.0.1:9', merchantNo: m.merchantNo, timeoutMs: 500 }),
    ]),
  );
  clients = [...platforms.values()];
  await dayOfTraffic();
  await env.db.db
    .insert(merchantPauses)
    .values({ merchantNo: 'M-WEST-0002', pausedBy: 'ada.admin', reason: 'platform incident on the west account' });
  await queues.of('brand-west').queue.add('payin', { receivedAt: new Date(Date.now() - 15 * 60_000).toISOString() });
  snapshot = createLaneSnapshot({
    redis,
    key: merchantKeys(env.prefix, 'brand-east').laneSnapshots,
    breaker: () => 'closed',
    getOrderRps: 40,
    logger,
    processId: 'worker-1',
    // A window longer than the test: the samples below stay in it, however slow the machine.
    intervalMs: 120_000,
  });
  for (let i = 0; i < 60; i++) snapshot.sample({ ms: 40 + (i % 20) * 6, ok: i !== 7 });
  await snapshot.write();
  app = await buildApp({
    config,
    operators: OPERATORS,
    db: env.db,
    platform: platforms.get('brand-east')!,
    platforms,
    logger,
    redis,
    queues,
    replayDriver: false,
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await snapshot?.close();
  await browser?.close();
  await app?.close();
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(queues?.list.map((q) => q.queue.close()) ?? []);
  redis?.disconnect();
  file.remove();
});

/** The page at both widths: no horizontal overflow, a screenshot of each; its main text. */
async function atBothWidths(page: Page, to: string, shot: string): Promise<string> {
  const violations: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy|Refused/i.test(m.text())) violations.push(m.text());
  });
  await page.goto(`${url}${to}`);
  await page.locator('h1').waitFor();
  for (const width of [1366, 375]) {
    await page.setViewportSize({ width, height: width === 375 ? 800 : 900 });
    expect(
      await page.evaluate<number>('document.documentElement.scrollWidth'),
      `${to} at ${width}`,
    ).toBeLessThanOrEqual(width);
    await page.screenshot({ path: path.join(ARTIFACTS, `${shot}-${width}.png`), fullPage: true });
  }
  expect(violations).toEqual([]);
  return (await page.locator('main').innerText()).replace(/\s+/g, ' ');
}

describe('the merchants page in a browser', () => {
  it('lists each merchant, and draws one merchant’s last 24 hours, readable at 1366 and 375 px', async () => {
    const page = await browser!.newPage();
    try {
      await page.goto(`${url}/login?next=${encodeURIComponent('/search')}`);
      await page.fill('#token', TOKENS.viewer);
      await Promise.all([page.waitForURL(`${url}/search`), page.click('button[type=submit]')]);
      // The landing page names the paused merchant, and its line leads to its page.
      const landing = (await page.locator('main').innerText()).replace(/\s+/g, ' ');
      expect(landing).toMatch(/brand-west: paused by ada\.admin: platform incident on the west account/);
      expect(landing).not.toMatch(/brand-east:/);
      await page.screenshot({ path: path.join(ARTIFACTS, 'merchants-landing-1366.png'), fullPage: true });

      await page.getByRole('link', { name: 'Merchants', exact: true }).click();
      const list = await atBothWidths(page, '/merchants', 'merchants-list');
      expect(list).toMatch(/brand-east M-EAST-0001 running/);
      expect(list).toMatch(/brand-west M-WEST-0002 paused by ada\.admin/);

      await page.getByRole('link', { name: 'brand-east' }).first().click();
      const one = await atBothWidths(page, '/merchants/brand-east', 'merchant-picture');
      expect(one).toMatch(/Merchant brand-east .*Merchant number M-EAST-0001/);
      expect(one).toMatch(/Get order p99 · error rate \d+ ms · 1\.7 %/);
      // Both charts, each an image with its name and its figures in words.
      const chart = page.getByRole('img', { name: 'brand-east: callbacks per minute, last 24 hours' });
      expect(await chart.count()).toBe(1);
      expect(await page.locator('#chart-callbacks-d').textContent()).toMatch(/\d+ received, \d+ credited, \d+ failed/);
      expect(await page.locator('#chart-callbacks polyline[data-series="received"]').count()).toBeGreaterThan(0);
      expect(await page.locator('#chart-p99 polyline[data-series="p99"]').count()).toBeGreaterThan(0);
      // The chart fits the 375 px screen, and its tick labels are not shrunk below 10 px there.
      const box = await chart.boundingBox();
      expect(box!.x + box!.width).toBeLessThanOrEqual(375);
      const tick = await page.locator('#chart-callbacks text.tick').first().boundingBox();
      expect(tick!.height).toBeGreaterThanOrEqual(10);

      const west = await atBothWidths(page, '/merchants/brand-west', 'merchant-paused');
      expect(west).toMatch(/Paused by ada\.admin since .*: platform incident on the west account/);
    } finally {
      await page.close();
    }
  }, 60_000);
});
