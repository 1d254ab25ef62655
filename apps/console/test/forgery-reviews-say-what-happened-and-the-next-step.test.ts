import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals } from '@mcb/core/db';
import { callbackJobSchema } from '@mcb/core/queue';
import { recordReview } from '@mcb/settlement';
import { createOrder, payinEvent, uid, useTestEnv } from '@mcb/testkit';
import { FORGERY_CODES } from '../src/callbacks/counts.ts';
import type { ReviewList } from '../src/reviews/queries.ts';
import { startConsoleWithPlatform, type TestConsole } from './helpers/fake-platform.ts';
import { runCli } from './helpers/cli.ts';
import { bearer, OPERATORS, TOKENS } from './helpers/operators.ts';

// Issue 49: a forgery review said only its code and a technical reason. It now says in words what happened and the
// next step (the key rotation of docs/runbook.md, with its real command) on the page, in the API and in the CLI; the
// landing's "suspected forgeries" counts only those whose review is open; and the order page marks a forged callback
// as such for every code that means one.
const env = useTestEnv();
let c: TestConsole;
let url: string;

beforeAll(async () => {
  c = await startConsoleWithPlatform(env, { operators: OPERATORS, listen: true });
  ({ url } = c);
});
afterAll(async () => {
  await c?.close();
});

const cli = (args: string[], cwd?: string) => runCli(url, TOKENS.operator, args, { cwd, timeoutMs: 30_000 });

/** A pay-in of 1,250.00 credited (receipt 12), and a callback that claimed 12,500.00 for the same pair, in review. */
async function forgedAfterCredit() {
  const no = uid();
  const [merchantOrderNo, orderNo] = [`MO-ST-${no}`, `P-ST-${no}`];
  await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '1250.00' });
  const event = callbackJobSchema.parse(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '12500.00' }));
  const { id } = await recordReview(env.db.db, event, {
    code: 'VERIFY_DIFFERS_FROM_APPLIED',
    reason: 'callback differs from what was applied (receipt 12 of this pair): fiatAmount 12500.00, applied 1250.00',
    details: {
      orderNo,
      merchantOrderNo,
      state: 6,
      against: 'receipt',
      receiptId: 12,
      differences: [{ field: 'fiatAmount', callback: '12500.00', applied: '1250.00' }],
    },
  });
  const now = new Date();
  await env.db.db.insert(callbackArrivals).values({
    jobId: `payin-${orderNo}-6-forged`,
    kind: 'payin',
    orderNo,
    state: 6,
    merchantOrderNo,
    amount: '12500.00',
    receivedAt: now,
    firstSeenAt: now,
    updatedAt: now,
    attempts: 1,
    status: 'review',
    lastCode: 'VERIFY_DIFFERS_FROM_APPLIED',
  });
  return { id, merchantOrderNo };
}

const HAPPENED =
  'The customer was credited 1,250.00 (receipt 12); another callback claimed 12,500.00 and was not paid. ' +
  'Callbacks are not signed: whoever sent it holds our public key.';

async function forgeriesOnLanding(): Promise<number> {
  const res = await c.app.inject({ method: 'GET', url: '/search', headers: bearer('viewer') });
  expect(res.statusCode).toBe(200);
  return Number(/data-count="forgeries">(\d+)</.exec(res.body)?.[1]);
}

describe('a forgery review an operator can act on', () => {
  it('says what happened and the key rotation, with its command, in the API, on the page and in the CLI', async () => {
    const { id, merchantOrderNo } = await forgedAfterCredit();
    const api = await c.app.inject({
      method: 'GET',
      url: `/api/reviews?merchantOrderNo=${merchantOrderNo}`,
      headers: bearer('viewer'),
    });
    const review = (api.json() as ReviewList).reviews[0]!;
    const month = review.createdAt.slice(0, 7);
    const command = `pnpm cli keys generate --out keys --name merchant-${month}`;
    expect(review.story).toEqual({
      suspectedForgery: true,
      happened: HAPPENED,
      nextStep: expect.stringContaining(
        `Rotate our callback key pair (docs/runbook.md, "Key rotation"): run ${command}`,
      ),
      command,
    });
    for (const step of [
      `MERCHANT_PRIVATE_KEY_FILE=keys/merchant-${month}-private.pem,<the current key file>`,
      'restart ingest',
      `upload keys/merchant-${month}-public.b64.txt to the platform's merchant console`,
      'ingest_decrypt_key_total{key_index="1"}',
    ]) {
      expect(review.story.nextStep).toContain(step);
    }

    const page = await c.app.inject({ method: 'GET', url: `/reviews?status=open`, headers: bearer('operator') });
    const card = page.body.slice(page.body.indexOf(`id="review-${id}-story"`));
    expect(card).toContain(`What happened:</strong> ${HAPPENED}`);
    expect(card).toContain('Next step:</strong> Rotate our callback key pair');
    expect(card).toContain(`<code class="command">${command}</code>`);

    const listed = await cli(['reviews', 'list', '--order', merchantOrderNo]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(`  what happened: ${HAPPENED}`);
    expect(listed.stdout).toContain(
      `  next step: Rotate our callback key pair (docs/runbook.md, "Key rotation"): run ${command}`,
    );

    // The command is the real one: run as written, it writes the pair the next steps name.
    const dir = await mkdtemp(path.join(tmpdir(), 'mcb-rotation-'));
    try {
      const ran = await cli(command.split(' ').slice(2), dir);
      expect(ran.code, ran.stderr).toBe(0);
      expect((await readdir(path.join(dir, 'keys'))).sort()).toEqual(
        [`merchant-${month}-private.pem`, `merchant-${month}-public.b64.txt`, `merchant-${month}-public.pem`].sort(),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a review that is not a forgery says so, and a closed one has no next step', async () => {
    const no = uid();
    const event = callbackJobSchema.parse(
      payinEvent({ orderNo: `P-NF-${no}`, merchantOrderNo: `MO-NF-${no}`, fiatAmount: '5' }),
    );
    await createOrder(env.db.db, { merchantOrderNo: `MO-NF-${no}`, kind: 'payin', amount: '5' });
    const { id } = await recordReview(env.db.db, event, {
      code: 'VERIFY_NOT_FINAL',
      reason: 'Get order reports state 1, not final',
      details: {},
    });
    const list = async () =>
      (
        (
          await c.app.inject({
            method: 'GET',
            url: `/api/reviews?merchantOrderNo=MO-NF-${no}`,
            headers: bearer('viewer'),
          })
        ).json() as ReviewList
      ).reviews[0]!;
    expect((await list()).story).toEqual({
      suspectedForgery: false,
      happened: 'Nothing was credited from it: Get order reports state 1, not final.',
      nextStep: expect.stringMatching(/^Re-verify once the platform confirms it/),
      command: null,
    });
    const dismissed = await c.app.inject({
      method: 'POST',
      url: `/api/reviews/${id}/dismiss`,
      headers: bearer('operator'),
      payload: { reason: 'the customer cancelled' },
    });
    expect(dismissed.statusCode, dismissed.body).toBe(200);
    expect((await list()).story.nextStep).toBe('None here: the review is dismissed.');
  });

  it('a review opened as "not final" that a forged event landed in later is a suspected forgery too', async () => {
    const no = uid();
    const [merchantOrderNo, orderNo] = [`MO-NL-${no}`, `P-NL-${no}`];
    await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '50.00' });
    const genuine = callbackJobSchema.parse(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '50.00' }));
    await recordReview(env.db.db, genuine, {
      code: 'VERIFY_NOT_FINAL',
      reason: 'Get order reports state 1',
      details: {},
    });
    await recordReview(env.db.db, callbackJobSchema.parse({ ...genuine, fiatAmount: '5000.00' }), {
      code: 'VERIFY_AMOUNT_MISMATCH',
      reason: 'Get order reports 50.00, the callback 5000.00',
      details: { confirmedAmount: '50.00', callbackAmount: '5000.00' },
    });
    const api = await c.app.inject({
      method: 'GET',
      url: `/api/reviews?merchantOrderNo=${merchantOrderNo}`,
      headers: bearer('viewer'),
    });
    const review = (api.json() as ReviewList).reviews[0]!;
    expect(review.reasonCode).toBe('VERIFY_NOT_FINAL');
    expect(review.story).toMatchObject({
      suspectedForgery: true,
      happened:
        'A callback claimed what Get order contradicts (Get order reports 50.00, the callback 5000.00), so nothing ' +
        'was paid on it. Callbacks are not signed: whoever sent it holds our public key.',
      nextStep: expect.stringMatching(/^Rotate our callback key pair/),
    });
  });

  it('"suspected forgeries" on the landing counts open ones: dismissing the review takes it off', async () => {
    const before = await forgeriesOnLanding();
    const { id } = await forgedAfterCredit();
    expect(await forgeriesOnLanding()).toBe(before + 1);
    const res = await c.app.inject({
      method: 'POST',
      url: `/api/reviews/${id}/dismiss`,
      headers: bearer('operator'),
      payload: { reason: 'forged: 12,500.00 claimed, 1,250.00 credited; key rotated' },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(await forgeriesOnLanding()).toBe(before);
  });

  it('the Callbacks page\'s "Suspected forgeries" lists the open ones, as many as the landing counts', async () => {
    const { id, merchantOrderNo } = await forgedAfterCredit();
    const landing = await c.app.inject({ method: 'GET', url: '/search', headers: bearer('viewer') });
    const href = /<a href="([^"]+)"><strong data-count="forgeries">/.exec(landing.body)![1]!.replaceAll('&amp;', '&');
    const preset = async () => {
      const res = await c.app.inject({ method: 'GET', url: href, headers: bearer('viewer') });
      expect(res.statusCode, res.body).toBe(200);
      return {
        n: Number(/id="list-h">(\d+) callback\(s\) match/.exec(res.body)?.[1]),
        listsIt: res.body.includes(`>${merchantOrderNo}</a>`),
      };
    };
    expect(await preset()).toEqual({ n: await forgeriesOnLanding(), listsIt: true });
    const res = await c.app.inject({
      method: 'POST',
      url: `/api/reviews/${id}/dismiss`,
      headers: bearer('operator'),
      payload: { reason: 'forged: key rotated' },
    });
    expect(res.statusCode, res.body).toBe(200);
    // Dismissed: off the preset as off the landing; the filter's "Review: closed" still finds it, as does the API.
    expect(await preset()).toEqual({ n: await forgeriesOnLanding(), listsIt: false });
    const closed = await c.app.inject({
      method: 'GET',
      url: `/callbacks?status=review&review=closed&merchantOrderNo=${merchantOrderNo}`,
      headers: bearer('viewer'),
    });
    expect(closed.body).toContain(`>${merchantOrderNo}</a>`);
    expect(closed.body).toContain('<option value="closed" selected>');
    for (const [review, n] of [
      ['open', 0],
      ['closed', 1],
    ] as const) {
      const api = await c.app.inject({
        method: 'GET',
        url: `/api/callbacks?merchantOrderNo=${merchantOrderNo}&review=${review}`,
        headers: bearer('viewer'),
      });
      expect((api.json() as { callbacks: unknown[] }).callbacks, review).toHaveLength(n);
    }
    const bad = await c.app.inject({ method: 'GET', url: '/api/callbacks?review=maybe', headers: bearer('viewer') });
    expect(bad.statusCode).toBe(400);
  });

  it('the order page marks a forged callback as a suspected forgery for every code that means one', async () => {
    for (const code of [...FORGERY_CODES, 'VERIFY_NOT_FINAL'] as const) {
      const no = uid();
      const [merchantOrderNo, orderNo] = [`MO-FC-${no}`, `P-FC-${no}`];
      await createOrder(env.db.db, { merchantOrderNo, kind: 'payin', amount: '50.00' });
      const event = callbackJobSchema.parse(payinEvent({ orderNo, merchantOrderNo, fiatAmount: '9999.99' }));
      await recordReview(env.db.db, event, { code, reason: `finding ${code}`, details: {} });
      const api = await c.app.inject({
        method: 'GET',
        url: `/api/orders/${merchantOrderNo}`,
        headers: bearer('viewer'),
      });
      const rows = (api.json() as { timeline: { event: string; code: string | null; detail: string }[] }).timeline;
      const forged = rows.filter((e) => e.event === 'differs-from-applied' || e.event === 'contradicts-get-order');
      const page = await c.app.inject({ method: 'GET', url: `/orders/${merchantOrderNo}`, headers: bearer('viewer') });
      if (code === 'VERIFY_NOT_FINAL') {
        expect(forged, code).toEqual([]);
        expect(page.body, code).not.toContain('suspected forgery:');
        continue;
      }
      expect(forged, code).toEqual([
        expect.objectContaining({ code, detail: expect.stringMatching(/^suspected forgery, nothing paid from it/) }),
      ]);
      expect(page.body, code).toMatch(/<span class="status status-failed">suspected forgery: /);
      expect(page.body, code).toContain('Suspected forgery. What happened:');
    }
  });
});
