import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { useTestEnv } from '@mcb/testkit';
import { captureLogger, MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';

const env = useTestEnv();
const ours = generateKeyPair();
const stranger = generateKeyPair();
const { logger, lines } = captureLogger();
let ingest: TestIngest;
let port: number;

beforeAll(async () => {
  ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: env.prefix,
    keyRing: loadKeyRing([ours.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true', INGEST_BODY_LIMIT: '4096' },
    logger,
  });
  const address = await ingest.app.listen({ host: '127.0.0.1', port: 0 });
  port = Number(new URL(address).port);
});
afterAll(async () => {
  await ingest?.close();
});

const record = {
  OrderNo: 'P1',
  MerchantNo: MERCHANT_NO,
  MerchantOrderNo: 'm-1',
  PayTime: '2024-05-01T08:30:00',
  OrderState: 6,
  Quantity: 1.5,
  FiatCurrency: 10,
};
const enc = (r: object | string, key = ours.publicKeyPem) => encryptRecord(r, key);

/** One raw HTTP exchange: the exact bytes of the reply. */
function rawExchange(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
    socket.write(request);
  });
}
function rawPost(path: string, body: string, contentType = 'application/json'): Promise<string> {
  return rawExchange(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${contentType}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
const withoutDate = (raw: string) => raw.replace(/^date: .*\r\n/im, '');

async function inject(opts: { method?: 'GET' | 'POST' | 'PUT'; url?: string; contentType?: string; payload?: string }) {
  const res = await ingest.app.inject({
    method: opts.method ?? 'POST',
    url: opts.url ?? '/callbacks',
    headers:
      opts.contentType === undefined ? { 'content-type': 'application/json' } : { 'content-type': opts.contentType },
    payload: opts.payload,
  });
  return { status: res.statusCode, body: res.body };
}

describe('ingest refuses bad callbacks with a uniform fail and enqueues nothing', () => {
  const tampered = (() => {
    const ct = Buffer.from(enc(record), 'base64');
    ct[42] = (ct[42] ?? 0) ^ 0x80;
    return ct.toString('base64');
  })();
  const { Quantity: _q, ...missing } = record;
  const contentFailures: Record<string, string> = {
    'tampered ciphertext': JSON.stringify({ encryptedData: tampered }),
    'a wrong key': JSON.stringify({ encryptedData: enc(record, stranger.publicKeyPem) }),
    "another merchant's number": JSON.stringify({ encryptedData: enc({ ...record, MerchantNo: 'M999' }) }),
    'bad Base64': JSON.stringify({ encryptedData: `${enc(record).slice(0, 20)}!${enc(record).slice(21)}` }),
    'non-JSON plaintext': JSON.stringify({ encryptedData: enc('not json at all') }),
    'a missing field': JSON.stringify({ encryptedData: enc(missing) }),
    'a wrong type': JSON.stringify({ encryptedData: enc({ ...record, FiatCurrency: '10' }) }),
    'a state the spec does not define': JSON.stringify({ encryptedData: enc({ ...record, OrderState: 1 }) }),
    'an amount with an exponent over 1000 in FiatCurrency': JSON.stringify({
      encryptedData: enc(JSON.stringify(record).replace('"FiatCurrency":10', '"FiatCurrency":7e1001')),
    }),
    'an amount with an exponent over 1000 in Quantity': JSON.stringify({
      encryptedData: enc(JSON.stringify(record).replace('"Quantity":1.5', '"Quantity":3e1001')),
    }),
    'a body that is not JSON': '{"encryptedData":',
    'a body without encryptedData': '{"data":"x"}',
  };
  for (const [name, payload] of Object.entries(contentFailures)) {
    it(`${name}: 400 fail`, async () => {
      expect(await inject({ payload })).toEqual({ status: 400, body: 'fail' });
    });
  }

  it('the wrong kind for the path: 400 fail on both typed routes', async () => {
    const payout = { OrderNo: 'W1', MerchantNo: MERCHANT_NO, MerchantOrderNo: 'p', PayTime: null, state: 4 };
    expect(await inject({ url: '/callbacks/payout', payload: JSON.stringify({ encryptedData: enc(record) }) })).toEqual(
      { status: 400, body: 'fail' },
    );
    expect(await inject({ url: '/callbacks/payin', payload: JSON.stringify({ encryptedData: enc(payout) }) })).toEqual({
      status: 400,
      body: 'fail',
    });
  });

  it('an oversized body: 413 fail', async () => {
    expect(await inject({ payload: JSON.stringify({ encryptedData: 'A'.repeat(5000) }) })).toEqual({
      status: 413,
      body: 'fail',
    });
  });

  it('GET and PUT on a callback route: 405 fail with Allow: POST', async () => {
    const res = await ingest.app.inject({ method: 'GET', url: '/callbacks/payin' });
    expect([res.statusCode, res.body, res.headers.allow]).toEqual([405, 'fail', 'POST']);
    expect(await inject({ method: 'PUT', payload: '{}' })).toEqual({ status: 405, body: 'fail' });
  });

  it('text/plain and form bodies: 415 fail, even when the content is a valid callback', async () => {
    const valid = JSON.stringify({ encryptedData: enc(record) });
    expect(await inject({ contentType: 'text/plain', payload: valid })).toEqual({ status: 415, body: 'fail' });
    expect(await inject({ contentType: 'application/x-www-form-urlencoded', payload: 'encryptedData=x' })).toEqual({
      status: 415,
      body: 'fail',
    });
  });

  it('a decryption failure and a wrong merchant get byte-identical replies except the Date header', async () => {
    const decryptFailure = await rawPost('/callbacks', JSON.stringify({ encryptedData: tampered }));
    const wrongMerchant = await rawPost(
      '/callbacks',
      JSON.stringify({ encryptedData: enc({ ...record, MerchantNo: 'M999' }) }),
    );
    const badBase64 = await rawPost('/callbacks', JSON.stringify({ encryptedData: '@@@@' }));
    expect(decryptFailure).toMatch(/^HTTP\/1\.1 400 /);
    expect(withoutDate(decryptFailure)).toBe(withoutDate(wrongMerchant));
    expect(withoutDate(badBase64)).toBe(withoutDate(wrongMerchant));
    expect(decryptFailure.endsWith('\r\n\r\nfail')).toBe(true);
  });

  // These two send their own refused callbacks, so that each checks something when it runs alone (vitest -t).
  it('no refused callback is enqueued, while a valid one sent right after is (the count can see a job)', async () => {
    const jobs = () =>
      ingest.queue.getJobCountByTypes('waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized');
    const before = await jobs();
    for (const payload of Object.values(contentFailures)) expect((await inject({ payload })).status).toBe(400);
    expect(await jobs()).toBe(before);
    const valid = { ...record, OrderNo: `P-VALID-${Date.now()}` };
    expect(await inject({ payload: JSON.stringify({ encryptedData: enc(valid) }) })).toEqual({
      status: 200,
      body: 'success',
    });
    expect(await jobs()).toBe(before + 1);
  });

  it('logs name the refusal code but never the body or the ciphertext', async () => {
    const from = lines.length;
    for (const name of [
      'tampered ciphertext',
      "another merchant's number",
      'non-JSON plaintext',
      'an amount with an exponent over 1000 in FiatCurrency',
    ]) {
      expect((await inject({ payload: contentFailures[name] })).status).toBe(400);
    }
    const all = lines.slice(from).join('');
    expect(all).toContain('CALLBACK_MERCHANT_MISMATCH');
    expect(all).toContain('CALLBACK_JSON_INVALID');
    expect(all).not.toContain(tampered.slice(0, 40));
    expect(all).not.toContain('not json at all');
    expect(all).not.toContain('"encryptedData":"');
    expect(all).not.toMatch(/[37]e1001/);
    expect(all).not.toContain('unexpected error');
  });

  it('the public listener serves no metrics', async () => {
    expect((await ingest.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
  });
});
