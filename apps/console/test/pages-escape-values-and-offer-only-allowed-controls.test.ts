import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operatorActions, reviews } from '@mcb/core/db';
import { createOrder, useTestEnv } from '@mcb/testkit';
import { AUTH, startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';
import { bearer, OPERATORS, type TOKENS } from './helpers/operators.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;
let reviewId: number;

// Values that would run as script or break out of an attribute if a page echoed them.
const EVIL_NO = `MO-"><script>alert(1)</script>`;
const EVIL_TEXT = `<img src=x onerror=alert(2)>'"&`;
// A field only the stored event has (the decrypted callback): it must reach no page and no API answer.
const DECRYPTED_MARKER = 'DECRYPTED-BODY-7f3a';

beforeAll(async () => {
  platform = await startFakePlatform();
  c = await startConsole({ db: env.db, databaseUrl: env.databaseUrl, baseUrl: platform.baseUrl, operators: OPERATORS });
  await createOrder(env.db.db, { merchantOrderNo: EVIL_NO, kind: 'payin', amount: '1234.56' });
  const [row] = await env.db.db
    .insert(reviews)
    .values({
      kind: 'payin',
      orderNo: 'P-EVIL',
      state: 6,
      merchantOrderNo: EVIL_NO,
      reasonCode: 'VERIFY_AMOUNT_MISMATCH',
      reason: EVIL_TEXT,
      details: { confirmedAmount: '1234.00', note: EVIL_TEXT },
      event: { orderNo: 'P-EVIL', merchantOrderNo: EVIL_NO, fiatAmount: '1234.56', customerNote: DECRYPTED_MARKER },
    })
    .returning();
  reviewId = row!.id;
  await env.db.db.insert(operatorActions).values({
    operator: 'ada.admin@example.com',
    role: 'admin',
    action: 'reviews.dismiss',
    target: `review:${reviewId}`,
    reason: EVIL_TEXT,
    outcome: 'failed:REVIEW_NOT_OPEN',
  });
});
afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

const page = async (url: string, who: keyof typeof TOKENS) => {
  const res = await c.app.inject({ method: 'GET', url, headers: { ...bearer(who), accept: 'text/html' } });
  return { status: res.statusCode, body: res.body, headers: res.headers };
};
const main = (body: string) => body.slice(body.indexOf('<main'));

describe('pages', () => {
  it('escape every value from the database, in text and attributes, and show amounts but never the stored event', async () => {
    for (const url of ['/reviews', `/orders/${encodeURIComponent(EVIL_NO)}`, '/audit']) {
      const { status, body, headers } = await page(url, 'admin');
      expect(status, url).toBe(200);
      expect(body, url).not.toContain('<script>alert');
      expect(body, url).not.toContain('<img src=x');
      expect(body, url).not.toContain(DECRYPTED_MARKER);
      expect(headers['content-security-policy'], url).toMatch(/default-src 'none'/);
    }
    const reviewsPage = (await page('/reviews', 'admin')).body;
    expect(reviewsPage).toContain('&lt;img src=x onerror=alert(2)&gt;&#39;&quot;&amp;');
    expect(reviewsPage).toContain(`href="/orders/${encodeURIComponent(EVIL_NO)}"`);
    expect((await page(`/orders/${encodeURIComponent(EVIL_NO)}`, 'viewer')).body).toContain('1,234.56 PHP');
    const api = await c.app.inject({ method: 'GET', url: '/api/reviews', headers: AUTH });
    expect(api.body).not.toContain(DECRYPTED_MARKER);
  });

  it('offer re-verify and dismiss to an operator, and no form at all to a viewer, on the inbox and the order page', async () => {
    const operator = main((await page('/reviews', 'operator')).body);
    expect(operator).toContain(`action="/reviews/${reviewId}/reverify"`);
    expect(operator).toContain(`action="/reviews/${reviewId}/dismiss"`);
    expect(operator).toMatch(/name="reason" required/);
    for (const url of ['/reviews', `/orders/${encodeURIComponent(EVIL_NO)}`]) {
      const viewer = main((await page(url, 'viewer')).body);
      expect(viewer, url).toContain(`id="review-${reviewId}"`);
      expect(viewer, url).not.toMatch(/method="post"/);
      expect(viewer, url).toContain('Re-verify and dismiss need the role operator (you are viewer).');
    }
  });

  it('offer the operator filter of the audit log to an admin only', async () => {
    expect(main((await page('/audit', 'admin')).body)).toContain('name="operator"');
    expect(main((await page('/audit', 'viewer')).body)).not.toContain('name="operator"');
    expect((await page('/audit?operator=ada.admin%40example.com', 'viewer')).status).toBe(403);
  });

  it('answer an unknown order and a bad filter with the error boundary as a page, with the same status as the API', async () => {
    const missing = await page('/orders/NOPE-1', 'viewer');
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toMatch(/text\/html/);
    expect(missing.body).toContain('404: NOT_FOUND');
    expect((await page('/audit?from=yesterday', 'viewer')).status).toBe(400);
  });

  it('search: a merchant order number or a platform number that a callback (here its review) names opens the order page; nothing found says so', async () => {
    const found = await c.app.inject({
      method: 'GET',
      url: `/search?q=${encodeURIComponent(EVIL_NO)}`,
      headers: { ...bearer('viewer'), accept: 'text/html' },
    });
    expect(found.statusCode).toBe(303);
    expect(found.headers.location).toBe(`/orders/${encodeURIComponent(EVIL_NO)}`);
    const byPlatform = await c.app.inject({
      method: 'GET',
      url: '/search?q=P-EVIL',
      headers: { ...bearer('viewer'), accept: 'text/html' },
    });
    expect(byPlatform.headers.location).toBe(`/orders/${encodeURIComponent(EVIL_NO)}`);
    // The empty search page says what waits for a person.
    expect((await page('/search', 'viewer')).body).toMatch(
      /<a href="\/reviews"><strong data-count="open review">1<\/strong> open review<\/a>/,
    );
    // Numbers are found whatever their case (each spelling is one exact look-up).
    const lower = await c.app.inject({
      method: 'GET',
      url: '/search?q=p-evil',
      headers: { ...bearer('viewer'), accept: 'text/html' },
    });
    expect(lower.headers.location).toBe(`/orders/${encodeURIComponent(EVIL_NO)}`);
    const none = await page('/search?q=NO-SUCH-ORDER', 'viewer');
    expect(none.body).toContain('No order and no callback found for <code>NO-SUCH-ORDER</code>');
  });
});
