import { execFile } from 'node:child_process';
import { constants, privateDecrypt } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { generateKeyPair } from '@mcb/core/callback';
import { AppError } from '@mcb/core/errors';
import { buildApp } from '../src/app.ts';
import { loadSandboxConfig } from '../src/config.ts';
import { postJson, testKeys } from './helpers/sandbox.ts';

// The sandbox as a platform holding several merchant accounts: each has its own number and key pair, and its
// callbacks go to its own route when the console URL is a `{ref}` template; each sees only its own orders.
const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const A = { ref: 'a', merchantNo: 'M-A-1', keys: testKeys() };
const B = { ref: 'b', merchantNo: 'M-B-2', keys: generateKeyPair() };

/** What a receiver got: the path and the record, decrypted with the key that opens it (or none). */
interface Got {
  path: string;
  record: Record<string, unknown> | undefined;
  openedBy: 'a' | 'b' | undefined;
}

function open(encryptedData: string, privateKeyPem: string): Record<string, unknown> | undefined {
  try {
    const plain = privateDecrypt(
      { key: privateKeyPem, padding: constants.RSA_PKCS1_PADDING },
      Buffer.from(encryptedData, 'base64'),
    );
    return JSON.parse(plain.toString('utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

let receiver: Server;
let receiverUrl: string;
const got: Got[] = [];
let app: FastifyInstance;
let url: string;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += String(c)));
    req.on('end', () => {
      const { encryptedData } = JSON.parse(body) as { encryptedData: string };
      const byA = open(encryptedData, A.keys.privateKeyPem);
      const byB = byA ? undefined : open(encryptedData, B.keys.privateKeyPem);
      got.push({ path: req.url ?? '', record: byA ?? byB, openedBy: byA ? 'a' : byB ? 'b' : undefined });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('success');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  app = await buildApp({
    merchants: [
      { ref: A.ref, merchantNo: A.merchantNo, merchantPublicKeyPem: A.keys.publicKeyPem },
      { ref: B.ref, merchantNo: B.merchantNo, merchantPublicKeyPem: B.keys.publicKeyPem },
    ],
    payinCallbackUrl: `${receiverUrl}/callbacks/m/{ref}/payin`,
    payoutCallbackUrl: `${receiverUrl}/callbacks/m/{ref}/payout`,
    timeScale: 6000,
    firstAttemptDelayMs: 0,
    replyTimeoutMs: 2000,
  });
  url = await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await app?.close();
  receiver?.closeAllConnections();
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
});

const call = (method: 'GET' | 'POST' | 'PUT', path: string, payload?: object) =>
  app.inject({ method, url: path, ...(payload ? { payload } : {}) });

describe('merchant accounts of one sandbox', () => {
  it("send each merchant's callback to its own route, encrypted with its own key, carrying its own number", async () => {
    const sim = app.sandbox;
    const b = sim.createPayin({ merchant: 'b', merchantOrderNo: 'ACC-1', currency: 'INR', amount: '10.00' });
    const a = sim.createPayin({ merchantOrderNo: 'ACC-1', currency: 'INR', amount: '20.00' });
    expect([a.merchant, b.merchant]).toEqual(['a', 'b']);
    for (const order of [b, a]) {
      const [delivery] = sim.finalize(order.orderNo, 6).deliveries;
      expect((await sim.settled(delivery!)).status).toBe('delivered');
      expect(delivery!.merchant).toBe(order.merchant);
    }
    const toB = got.find((g) => g.record?.OrderNo === b.orderNo);
    const toA = got.find((g) => g.record?.OrderNo === a.orderNo);
    expect(toB).toMatchObject({ path: '/callbacks/m/b/payin', openedBy: 'b', record: { MerchantNo: B.merchantNo } });
    expect(toA).toMatchObject({ path: '/callbacks/m/a/payin', openedBy: 'a', record: { MerchantNo: A.merchantNo } });
  });

  it('answer Get order and the catalog for each merchant number, with that merchant its own orders only', async () => {
    const b = app.sandbox.createPayin({ merchant: 'b', merchantOrderNo: 'ONLY-B', currency: 'INR', amount: '5.00' });
    const getOrder = (merchantNo: string, merchantOrderNo: string) =>
      postJson(url, '/api/open/order/getOrder', { merchantNo, merchantOrderNo });
    expect((await getOrder(B.merchantNo, 'ONLY-B')).json).toMatchObject({
      code: 0,
      data: { orderNo: b.orderNo, merchantNo: B.merchantNo, amount: '5.00' },
    });
    expect((await getOrder(A.merchantNo, 'ONLY-B')).json).toMatchObject({ code: 40404 });
    expect((await getOrder('M-NOBODY', 'ONLY-B')).json).toMatchObject({ code: 40010 });
    const catalog = await postJson(url, '/api/open/order/getPaymentMethods', { merchantNo: B.merchantNo });
    expect(catalog.json).toMatchObject({ code: 0 });
  });

  it('keep merchant order numbers unique per merchant, and refuse an account that does not exist', async () => {
    expect(
      (await call('POST', '/control/payins', { merchant: 'b', merchantOrderNo: 'U-1', currency: 'INR', amount: '1' }))
        .statusCode,
    ).toBe(201);
    expect(
      (await call('POST', '/control/payins', { merchant: 'a', merchantOrderNo: 'U-1', currency: 'INR', amount: '1' }))
        .statusCode,
    ).toBe(201);
    expect(
      (await call('POST', '/control/payins', { merchant: 'b', merchantOrderNo: 'U-1', currency: 'INR', amount: '1' }))
        .statusCode,
    ).toBe(409);
    const unknown = await call('POST', '/control/payins', { merchant: 'zz', currency: 'INR', amount: '1' });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().details).toMatchObject({ field: 'merchant' });
    expect((await call('GET', '/control/orders/U-1?merchant=b')).json().order.merchant).toBe('b');
    expect((await call('GET', '/control/orders/U-1?merchant=a')).json().order.merchant).toBe('a');
    expect(
      (await call('GET', '/control/orders?merchant=b'))
        .json()
        .orders.every((o: { merchant: string }) => o.merchant === 'b'),
    ).toBe(true);
  });

  it('list the accounts and keep console URLs per merchant', async () => {
    expect((await call('GET', '/control/merchants')).json().merchants).toEqual([
      {
        ref: 'a',
        merchantNo: A.merchantNo,
        payinCallbackUrl: `${receiverUrl}/callbacks/m/a/payin`,
        payoutCallbackUrl: `${receiverUrl}/callbacks/m/a/payout`,
      },
      {
        ref: 'b',
        merchantNo: B.merchantNo,
        payinCallbackUrl: `${receiverUrl}/callbacks/m/b/payin`,
        payoutCallbackUrl: `${receiverUrl}/callbacks/m/b/payout`,
      },
    ]);
    const changed = await call('PUT', '/control/settings', {
      merchant: 'b',
      payoutCallbackUrl: `${receiverUrl}/elsewhere`,
    });
    expect(changed.json()).toMatchObject({
      merchant: 'b',
      merchantNo: B.merchantNo,
      payoutCallbackUrl: `${receiverUrl}/elsewhere`,
    });
    expect((await call('GET', '/control/settings?merchant=a')).json().payoutCallbackUrl).toBe(
      `${receiverUrl}/callbacks/m/a/payout`,
    );
    expect((await call('GET', '/control/settings')).json()).toMatchObject({ merchant: 'a', merchantNo: A.merchantNo });
    await call('PUT', '/control/settings', { merchant: 'b', payoutCallbackUrl: `${receiverUrl}/callbacks/m/b/payout` });
  });

  it('pnpm sandbox trigger --merchant b sends b its callback on its route; order --merchant shows it', async () => {
    const cli = (...args: string[]) =>
      run(process.execPath, [CLI, ...args], { env: { ...process.env, SANDBOX_URL: url }, timeout: 20_000 });
    const { stdout } = await cli(
      'trigger',
      'payin',
      '--unregistered',
      '--merchant',
      'b',
      '--merchant-order-no',
      'CLI-B',
    );
    expect(stdout).toMatch(/payin PI\w+ \(merchant b, merchant order CLI-B\): 1000 INR, state 6/);
    expect(stdout).toMatch(/→ .*\/callbacks\/m\/b\/payin: delivered/);
    const delivered = got.find((g) => g.record?.MerchantOrderNo === 'CLI-B');
    expect(delivered).toMatchObject({
      path: '/callbacks/m/b/payin',
      openedBy: 'b',
      record: { MerchantNo: B.merchantNo },
    });
    const order = await cli('order', 'CLI-B', '--merchant', 'b');
    expect(order.stdout).toMatch(/merchant b, merchant order CLI-B/);
  });
});

describe('sandbox options and settings for several accounts', () => {
  const optionsError = async (opts: Parameters<typeof buildApp>[0]) => {
    const e = await buildApp(opts).then(
      (a) => a.close().then(() => undefined),
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(AppError);
    return (e as AppError).message;
  };
  const pem = testKeys().publicKeyPem;

  it('names each bad account by its position and field', async () => {
    const message = await optionsError({
      merchants: [
        { ref: 'a', merchantNo: 'M1', merchantPublicKeyPem: pem },
        { ref: 'a', merchantNo: 'M1', merchantPublicKeyPem: 'nope' },
        { ref: 'Bad Ref', merchantNo: '', merchantPublicKeyPem: pem, payinCallbackUrl: 'http://example.com/x' },
      ],
    });
    expect(message).toContain('merchants[1].ref: the same as another account');
    expect(message).toContain("merchants[1].merchantNo: the same as another account's");
    expect(message).toContain('merchants[1].merchantPublicKeyPem: not a usable RSA public key');
    expect(message).toContain('merchants[2].ref: expected 1 to 32 of a-z, 0-9 and -');
    expect(message).toContain('merchants[2].merchantNo: required');
    expect(message).toContain('merchants[2].payinCallbackUrl: callbackUrl must be a publicly reachable https address');
  });

  it('takes either merchants or merchantNo and its key, not both', async () => {
    expect(
      await optionsError({
        merchantNo: 'M1',
        merchantPublicKeyPem: pem,
        merchants: [{ ref: 'a', merchantNo: 'M2', merchantPublicKeyPem: pem }],
      }),
    ).toContain('merchants: give either merchants or merchantNo and merchantPublicKeyPem, not both');
  });

  it('reads every merchant of MERCHANTS_FILE, and refuses SANDBOX_MERCHANT_NO beside it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcb-sandbox-merchants-'));
    try {
      const file = join(dir, 'merchants.json');
      writeFileSync(
        file,
        JSON.stringify({
          merchants: [
            { ref: 'a', merchantNo: 'M-A', privateKeyFiles: ['/k/a.pem', '/k/a-old.pem'], legacyRoutes: true },
            { ref: 'b', merchantNo: 'M-B', privateKeyFiles: ['/k/b.pem'] },
          ],
        }),
      );
      const c = loadSandboxConfig({
        MERCHANTS_FILE: file,
        SANDBOX_PAYIN_CALLBACK_URL: 'http://127.0.0.1:8080/callbacks/m/{ref}/payin',
      });
      expect(c.merchants).toEqual([
        { ref: 'a', merchantNo: 'M-A', publicKey: { file: '/k/a.pem', derive: true } },
        { ref: 'b', merchantNo: 'M-B', publicKey: { file: '/k/b.pem', derive: true } },
      ]);
      expect(c).toMatchObject({ merchantNo: 'M-A', payinCallbackUrl: 'http://127.0.0.1:8080/callbacks/m/{ref}/payin' });
      expect(() => loadSandboxConfig({ MERCHANTS_FILE: file, SANDBOX_MERCHANT_NO: 'S1' })).toThrow(
        /SANDBOX_MERCHANT_NO: not used with MERCHANTS_FILE/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
