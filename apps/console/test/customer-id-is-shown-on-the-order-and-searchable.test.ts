import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '@mcb/testkit';
import { AUTH, startConsole, startFakePlatform, type TestConsole } from './helpers/fake-platform.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
let c: TestConsole;

beforeAll(async () => {
  platform = await startFakePlatform();
  c = await startConsole({ db: env.db, databaseUrl: env.databaseUrl, baseUrl: platform.baseUrl });
  for (const [merchantOrderNo, customerId] of [
    ['CU-1', 'cust-7'],
    ['CU-2', 'cust-7'],
    ['CU-3', 'cust-8'],
  ]) {
    const res = await c.app.inject({
      method: 'POST',
      url: '/api/payins',
      headers: AUTH,
      payload: { merchantOrderNo, currency: 'PHP', amount: '1250.5', customerId, reason: 'test order' },
    });
    expect(res.statusCode).toBe(201);
  }
});
afterAll(async () => {
  await c?.close();
  await platform?.stop();
});

const get = (url: string) => c.app.inject({ method: 'GET', url, headers: { ...AUTH, accept: 'text/html' } });

describe('the customer id an order was registered with', () => {
  it('is in the order API and on the order page', async () => {
    const api = await c.app.inject({ method: 'GET', url: '/api/orders/CU-3', headers: AUTH });
    expect(api.json()).toMatchObject({ merchantOrderNo: 'CU-3', customerId: 'cust-8' });
    const page = await get('/orders/CU-3');
    expect(page.statusCode).toBe(200);
    expect(page.body).toMatch(/<dt>Customer<\/dt><dd class="mono">cust-8<\/dd>/);
  });

  it("is searchable: one customer's only order opens, several are listed with their amounts", async () => {
    const one = await get('/search?q=cust-8');
    expect([one.statusCode, one.headers.location]).toEqual([303, '/orders/CU-3']);
    const several = await get('/search?q=cust-7');
    expect(several.statusCode).toBe(200);
    expect(several.body).toContain('Orders of customer <code>cust-7</code>');
    expect(several.body).toContain('<a href="/orders/CU-1">CU-1</a>');
    expect(several.body).toContain('<a href="/orders/CU-2">CU-2</a>');
    expect(several.body).toContain('1,250.50 PHP');
    expect((await get('/search?q=cust-9')).body).toContain('No order and no callback found');
  });
});
