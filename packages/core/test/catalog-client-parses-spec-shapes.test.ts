import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isAppError } from '@mcb/core/errors';
import {
  createPlatformClient,
  createPlatformHttp,
  getPaymentMethods,
  PlatformCodeError,
  type PlatformClient,
} from '@mcb/core/platform';

/** The catalog as the platform sends it, with fields the spec does not list (they must be ignored). */
const wireCatalog = {
  currencies: [
    {
      currency: 'PHP',
      symbol: '₱',
      decimals: 2,
      region: 'PH',
      methods: [
        {
          paymentMethod: 1,
          name: 'Bank transfer',
          kind: 'bank',
          sort: 3,
          fields: [
            {
              key: 'accountNo',
              apiParam: 'bankAccount',
              label: 'Account',
              required: true,
              pattern: '^\\d+$',
              hint: 'digits',
              maxLen: 16,
            },
          ],
          banks: [{ name: 'BDO Unibank', code: 'BDO', logo: 'x.png' }],
        },
        { paymentMethod: 2, name: 'GCash', kind: 'wallet', fields: [], banks: null },
        { paymentMethod: 3, name: 'QR Ph', kind: 'qrcode', fields: [] },
      ],
    },
    { currency: 'VND', symbol: '₫', decimals: 0, methods: [] },
  ],
};

interface Seen {
  contentType: string | undefined;
  body: string;
}

/** A local platform: answers getPaymentMethods with whatever `reply` says, records what it was sent. */
let reply: (body: Record<string, string>) => unknown = () => ({ code: 0, message: 'success', data: wireCatalog });
let seen: Seen[] = [];
let server: http.Server;
let baseUrl: string;
let client: PlatformClient;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      seen.push({ contentType: req.headers['content-type'], body: raw });
      if (req.url !== '/api/open/order/getPaymentMethods') {
        res.writeHead(404).end();
        return;
      }
      const parsed: Record<string, string> = req.headers['content-type']?.startsWith('application/json')
        ? JSON.parse(raw)
        : Object.fromEntries(new URLSearchParams(raw));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(reply(parsed)));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  client = createPlatformClient({ baseUrl, merchantNo: 'M100', timeoutMs: 2000 });
});

afterAll(async () => {
  await client.close();
  await new Promise((r) => server.close(r));
});

beforeEach(() => {
  seen = [];
  reply = () => ({ code: 0, message: 'success', data: wireCatalog });
});

describe('getPaymentMethods', () => {
  it('parses every kind of method, field and bank list, dropping fields the spec does not list', async () => {
    const catalog = await client.getPaymentMethods();
    expect(catalog.currencies.map((c) => c.currency)).toEqual(['PHP', 'VND']);
    const [bank, wallet, qr] = catalog.currencies[0]!.methods;
    expect(bank).toEqual({
      paymentMethod: 1,
      name: 'Bank transfer',
      kind: 'bank',
      fields: [
        {
          key: 'accountNo',
          apiParam: 'bankAccount',
          label: 'Account',
          required: true,
          pattern: '^\\d+$',
          hint: 'digits',
        },
      ],
      banks: [{ name: 'BDO Unibank', code: 'BDO' }],
    });
    expect(wallet!.kind).toBe('wallet');
    expect(wallet!.banks).toBeUndefined(); // null reads as absent
    expect(qr!.kind).toBe('qrcode');
    expect(qr!.banks).toBeUndefined();
    expect(catalog.currencies[0]).not.toHaveProperty('region');
  });

  it('sends merchantNo as JSON by default and adds currencyType only when asked, which narrows the answer', async () => {
    reply = (body) => ({
      code: 0,
      message: 'ok',
      data: {
        currencies: wireCatalog.currencies.filter((c) => !body.currencyType || c.currency === body.currencyType),
      },
    });
    await client.getPaymentMethods();
    const narrowed = await client.getPaymentMethods({ currencyType: 'VND' });
    expect(narrowed.currencies.map((c) => c.currency)).toEqual(['VND']);
    expect(seen.map((s) => [s.contentType, JSON.parse(s.body)])).toEqual([
      ['application/json', { merchantNo: 'M100' }],
      ['application/json', { merchantNo: 'M100', currencyType: 'VND' }],
    ]);
  });

  it('sends a form body when configured for form encoding', async () => {
    const formClient = createPlatformClient({ baseUrl, merchantNo: 'M 100&x', contentType: 'form', timeoutMs: 2000 });
    try {
      await formClient.getPaymentMethods({ currencyType: 'PHP' });
    } finally {
      await formClient.close();
    }
    expect(seen).toEqual([
      { contentType: 'application/x-www-form-urlencoded', body: 'merchantNo=M+100%26x&currencyType=PHP' },
    ]);
  });

  it.each([
    [40010, 'merchant not found'],
    [40017, 'currency not enabled'],
    [50001, ''],
  ])('turns code %i into a PlatformCodeError carrying the code and message', async (code, message) => {
    reply = () => ({ code, message, data: null });
    const err = await client.getPaymentMethods().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlatformCodeError);
    expect(err).toMatchObject({ code: 'PLATFORM_ERROR_CODE', platformCode: code, platformMessage: message });
    expect((err as Error).message).toContain(String(code));
  });

  it.each([
    ['decimals missing', { currencies: [{ currency: 'PHP', symbol: 'P', methods: [] }] }, 'currencies.0.decimals'],
    [
      'unknown kind',
      {
        currencies: [
          { ...wireCatalog.currencies[0], methods: [{ paymentMethod: 1, name: 'x', kind: 'card', fields: [] }] },
        ],
      },
      'currencies.0.methods.0.kind',
    ],
    [
      'required flag as string',
      {
        currencies: [
          {
            currency: 'PHP',
            symbol: 'P',
            decimals: 2,
            methods: [
              {
                paymentMethod: 1,
                name: 'x',
                kind: 'bank',
                fields: [{ key: 'k', apiParam: 'k', label: 'l', required: 'yes', pattern: '', hint: '' }],
              },
            ],
          },
        ],
      },
      'currencies.0.methods.0.fields.0.required',
    ],
    [
      'hint missing',
      {
        currencies: [
          {
            currency: 'PHP',
            symbol: 'P',
            decimals: 2,
            methods: [
              {
                paymentMethod: 1,
                name: 'x',
                kind: 'bank',
                fields: [{ key: 'k', apiParam: 'k', label: 'l', required: true, pattern: '' }],
              },
            ],
          },
        ],
      },
      'currencies.0.methods.0.fields.0.hint',
    ],
    [
      'paymentMethod not an int',
      {
        currencies: [
          {
            currency: 'PHP',
            symbol: 'P',
            decimals: 2,
            methods: [{ paymentMethod: 1.5, name: 'x', kind: 'bank', fields: [] }],
          },
        ],
      },
      'currencies.0.methods.0.paymentMethod',
    ],
    ['no data', undefined, '(root)'],
  ])('refuses a catalog with %s as PLATFORM_BAD_RESPONSE naming the path', async (_what, data, path) => {
    reply = () => ({ code: 0, message: 'success', data });
    const err = await client.getPaymentMethods().catch((e: unknown) => e);
    expect(isAppError(err, 'PLATFORM_BAD_RESPONSE')).toBe(true);
    const issues = (err as { details: { issues: string[] } }).details.issues.join('\n');
    expect(path === '(root)' ? issues.length > 0 : issues.includes(path)).toBe(true);
  });

  it('reports an unreachable platform as a transient PLATFORM_UNREACHABLE', async () => {
    const dead = http.createServer();
    await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
    const port = (dead.address() as AddressInfo).port;
    await new Promise((r) => dead.close(r));
    const h = createPlatformHttp({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 2000 });
    try {
      const err = await getPaymentMethods(h, { merchantNo: 'M100', contentType: 'json' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'PLATFORM_UNREACHABLE', transient: true });
    } finally {
      await h.close();
    }
  });
});
