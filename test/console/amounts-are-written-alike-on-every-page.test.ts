import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reviews } from '@mcb/core/db';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { eq } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { ledgerOf, startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// One amount, 1250.5 INR, is written "1,250.50" on every page that shows it (through @mcb/core/money's
// formatDecimal), and never as the raw "1250.5" one page printed while another grouped it. JSON keeps the raw text.
const env = useTestEnv();
let stack: OpsStack;

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: true, consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await stack?.close();
});

const main = async (url: string) => {
  const res = await stack.app.inject({ method: 'GET', url, headers: { ...bearer('viewer'), accept: 'text/html' } });
  expect(res.statusCode, url).toBe(200);
  return res.body.slice(res.body.indexOf('<main'));
};
/** The page once `ready` holds: the worker's arrival rows are written a moment after its credit commits. */
const mainOnce = (url: string, ready: (body: string) => boolean) =>
  waitFor(
    async () => {
      const body = await main(url);
      return ready(body) ? body : false;
    },
    { message: `${url} never showed what it waits for` },
  );
// "1250.5" standing alone (not a part of "1,250.50" nor of a longer number).
const RAW = /(?<![\d,.])1250\.50?(?![\d])/;

/** A pay-in of 1250.5 INR whose callback claims `fiatAmount`, worked by the worker until `settled` holds. */
async function payin(fiatAmount: string, settled: (merchantOrderNo: string) => Promise<unknown>) {
  const no = uid();
  const [merchantOrderNo, orderNo] = [`MO-AM-${no}`, `P-AM-${no}`];
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '1250.5', currency: 'INR' });
  stack.platform.setOrder(
    platformOrder({ orderNo, merchantOrderNo, type: 'payin', state: 6, amountJson: '"1250.5"', currency: 'INR' }),
  );
  await stack.add(payinEvent({ orderNo, merchantOrderNo, fiatAmount }));
  await waitFor(() => settled(merchantOrderNo), { message: 'not settled' });
  return merchantOrderNo;
}

describe('amounts', () => {
  it('are written "1,250.50" on the order page, its timeline, the callbacks page and the review, never raw', async () => {
    const credited = await payin('1250.5', async (no) => (await ledgerOf(env.db.db, no)).ledger.length === 1);

    const order = await mainOnce(`/orders/${credited}`, (b) => b.includes('Get order confirmed state 6'));
    expect(order).toContain('<dt>Amount</dt><dd class="mono">1,250.50 INR</dd>');
    expect(order).toMatch(/For the customer:<\/strong> Credited at [^<]*: 1,250\.50 INR\./);
    expect(order).toMatch(/data-label="Amount" class="num mono">1,250\.50<\/td><td data-label="Currency">INR/);
    expect(order).toContain('payin_credit 1,250.50 INR');
    expect(order).toContain('Get order confirmed state 6 and 1,250.50;');
    expect(order).not.toMatch(RAW);

    const callbacks = await mainOnce(`/callbacks?merchantOrderNo=${credited}`, (b) =>
      b.includes('data-label="Amount"'),
    );
    expect(callbacks).toMatch(/data-label="Amount" class="num mono">1,250\.50<\/td>/);
    expect(callbacks).not.toMatch(RAW);

    // A callback claiming 12500 for the same order amount: a review, its compared amounts written alike.
    const reviewOf = async (no: string) =>
      (await env.db.db.select().from(reviews).where(eq(reviews.merchantOrderNo, no)))[0];
    const reviewed = await payin('12500', reviewOf);
    const review = await reviewOf(reviewed);
    expect(review).toMatchObject({ reasonCode: 'VERIFY_AMOUNT_MISMATCH' });
    for (const url of [`/reviews?merchantOrderNo=${reviewed}`, `/orders/${reviewed}`]) {
      // The finding's reason is quoted as the worker recorded it ("Get order reports 1250.5, ..."): stored text.
      const page = (await main(url)).replaceAll(review!.reason, '');
      expect(page, url).toContain('<dt>confirmedAmount</dt><dd class="mono">1,250.50</dd>');
      expect(page, url).toContain('<dt>callbackAmount</dt><dd class="mono">12,500.00</dd>');
      expect(page, url).not.toMatch(RAW);
      expect(page, url).not.toMatch(/(?<![\d,.])12500(?![\d,])/);
    }

    // The JSON API keeps the amounts as the raw decimal strings the contract names.
    const api = await stack.app.inject({ method: 'GET', url: `/api/orders/${credited}`, headers: bearer('viewer') });
    expect(api.json()).toMatchObject({ amount: '1250.5', ledger: [{ amount: '1250.5', currency: 'INR' }] });
  });
});
