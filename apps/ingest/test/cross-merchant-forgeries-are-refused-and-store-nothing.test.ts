import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackJobId } from '@mcb/core/queue';
import { useTestEnv } from '@mcb/testkit';
import {
  callbackFor,
  payinRecord,
  startMerchantsIngest,
  testMerchant,
  type MerchantsIngest,
  type TestMerchant,
} from '@mcb/testkit/ingest';

// Two merchants in one deployment, each with its own key pair, number and queue; A also holds /callbacks. Every
// forgery across them must get the uniform 400 fail of a wrong key and store nothing in either queue.
const env = useTestEnv();
const A = testMerchant('a', 'M-A-1001', true);
const B = testMerchant('b', 'M-B-2002');
let ingest: MerchantsIngest;
let port: number;

beforeAll(async () => {
  ingest = await startMerchantsIngest({
    merchants: [A, B],
    prefix: env.prefix,
    env: { REDIS_URL: env.redisUrl, INGEST_ALLOW_VOLATILE_REDIS: 'true' },
  });
  port = Number(new URL(await ingest.app.listen({ host: '127.0.0.1', port: 0 })).port);
});
afterAll(async () => {
  await ingest?.close();
});

let seq = 0;
const orderNo = (label: string) => `${label}-${Date.now()}-${++seq}`;

async function post(url: string, payload: string) {
  const res = await ingest.app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json' },
    payload,
  });
  return { status: res.statusCode, body: res.body };
}

/** Jobs in each merchant's queue, in any state. */
async function stored(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const lane of ingest.lanes) {
    counts[lane.merchant.ref] = await lane.queue.getJobCountByTypes(
      'waiting',
      'active',
      'completed',
      'failed',
      'delayed',
      'prioritized',
    );
  }
  return counts;
}

/** Send it; it must be answered 400 fail and leave both queues as they were. */
async function expectRefusedAndNothingStored(url: string, payload: string): Promise<void> {
  const before = await stored();
  expect(await post(url, payload)).toEqual({ status: 400, body: 'fail' });
  expect(await stored()).toEqual(before);
}

/** A callback record of `merchant`'s number, encrypted with `key`'s public key. */
const forged = (key: TestMerchant, merchant: TestMerchant, no: string) => callbackFor(key, payinRecord(merchant, no));

/** One raw HTTP exchange with the ingest listening on `at`: the exact bytes of the reply. */
function rawPost(path: string, body: string, at = port): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(at, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
const withoutDate = (raw: string) => raw.replace(/^date: .*\r\n/im, '');

describe('callbacks across two merchants', () => {
  it("control: each merchant's genuine callback on its own route is stored in its own queue, with its number", async () => {
    const [a, b] = [orderNo('PA'), orderNo('PB')];
    const before = await stored();
    expect(await post('/callbacks/m/a', forged(A, A, a))).toEqual({ status: 200, body: 'success' });
    expect(await post('/callbacks/m/b/payin', forged(B, B, b))).toEqual({ status: 200, body: 'success' });
    expect(await stored()).toEqual({ a: before.a! + 1, b: before.b! + 1 });
    expect((await ingest.lane('a').queue.getJob(callbackJobId('payin', a, 6)))?.data.merchantNo).toBe(A.merchantNo);
    expect((await ingest.lane('b').queue.getJob(callbackJobId('payin', b, 6)))?.data.merchantNo).toBe(B.merchantNo);
    expect(await ingest.lane('a').queue.getJob(callbackJobId('payin', b, 6))).toBeUndefined();
  });

  it("A's key with B's number on B's path: 400 fail, nothing stored", async () => {
    await expectRefusedAndNothingStored('/callbacks/m/b', forged(A, B, orderNo('F1')));
  });

  it("A's key with B's number on A's path: 400 fail, nothing stored", async () => {
    await expectRefusedAndNothingStored('/callbacks/m/a', forged(A, B, orderNo('F2')));
  });

  it("B's key with A's number on B's path: 400 fail, nothing stored", async () => {
    await expectRefusedAndNothingStored('/callbacks/m/b', forged(B, A, orderNo('F3')));
  });

  it("a genuine B callback replayed on A's path: 400 fail, nothing stored", async () => {
    const genuine = forged(B, B, orderNo('R1'));
    await expectRefusedAndNothingStored('/callbacks/m/a', genuine);
    await expectRefusedAndNothingStored('/callbacks/m/a/payin', genuine);
  });

  it('a genuine B callback replayed on /callbacks (A holds the legacy routes): 400 fail, nothing stored', async () => {
    const genuine = forged(B, B, orderNo('R2'));
    await expectRefusedAndNothingStored('/callbacks', genuine);
    await expectRefusedAndNothingStored('/callbacks/payin', genuine);
    // ...while A's own callback there is A's.
    const a = orderNo('L1');
    expect(await post('/callbacks', forged(A, A, a))).toEqual({ status: 200, body: 'success' });
    expect((await ingest.lane('a').queue.getJob(callbackJobId('payin', a, 6)))?.data.merchantNo).toBe(A.merchantNo);
  });

  it('an unknown ref is answered byte for byte like a wrong key, even with a genuine callback, and stores nothing', async () => {
    const genuineA = forged(A, A, orderNo('U1'));
    const wrongKey = await rawPost('/callbacks/m/a', forged(B, A, orderNo('U2')));
    expect(wrongKey).toMatch(/^HTTP\/1\.1 400 /);
    expect(wrongKey.endsWith('\r\n\r\nfail')).toBe(true);
    const before = await stored();
    for (const path of ['/callbacks/m/zz', '/callbacks/m/zz/payin', '/callbacks/m/zz/payout', '/callbacks/m/A']) {
      expect(withoutDate(await rawPost(path, genuineA))).toBe(withoutDate(wrongKey));
    }
    expect(withoutDate(await rawPost('/callbacks/m/zz', '{"encryptedData":"@@"}'))).toBe(withoutDate(wrongKey));
    expect(await stored()).toEqual(before);
  });

  it('a GET on a merchant route is answered alike whether or not the ref exists (405 fail, Allow: POST)', async () => {
    const known = await ingest.app.inject({ method: 'GET', url: '/callbacks/m/a/payin' });
    const unknown = await ingest.app.inject({ method: 'GET', url: '/callbacks/m/nobody/payin' });
    for (const res of [known, unknown])
      expect([res.statusCode, res.body, res.headers.allow]).toEqual([405, 'fail', 'POST']);
  });
});

describe('what ingest does of a callback that names another merchant order (the ingest half)', () => {
  it("B's callback with A's merchant order number on B's path is acknowledged and stored in B's queue only, in B's name", async () => {
    const sharedMerchantOrderNo = `SHARED-${Date.now()}`;
    const [a, b] = [orderNo('MA'), orderNo('MB')];
    expect(
      await post('/callbacks/m/a', callbackFor(A, payinRecord(A, a, { MerchantOrderNo: sharedMerchantOrderNo }))),
    ).toEqual({ status: 200, body: 'success' });
    const aJob = await ingest.lane('a').queue.getJob(callbackJobId('payin', a, 6));
    const before = await stored();
    expect(
      await post('/callbacks/m/b', callbackFor(B, payinRecord(B, b, { MerchantOrderNo: sharedMerchantOrderNo }))),
    ).toEqual({ status: 200, body: 'success' });
    expect(await stored()).toEqual({ a: before.a, b: before.b! + 1 });
    const bJob = await ingest.lane('b').queue.getJob(callbackJobId('payin', b, 6));
    expect(bJob?.data).toMatchObject({ merchantNo: B.merchantNo, merchantOrderNo: sharedMerchantOrderNo });
    // A's job is as it was.
    expect((await ingest.lane('a').queue.getJob(callbackJobId('payin', a, 6)))?.data).toEqual(aJob?.data);
  });

  it('the same platform order number for two merchants: each stored once, in its own queue', async () => {
    const no = orderNo('SAME');
    const before = await stored();
    for (let i = 0; i < 2; i++) {
      expect(await post('/callbacks/m/a', forged(A, A, no))).toEqual({ status: 200, body: 'success' });
      expect(await post('/callbacks/m/b', forged(B, B, no))).toEqual({ status: 200, body: 'success' });
    }
    expect(await stored()).toEqual({ a: before.a! + 1, b: before.b! + 1 });
  });
});

describe('a deployment where no merchant holds the legacy routes', () => {
  let other: MerchantsIngest;
  let otherPort: number;
  beforeAll(async () => {
    other = await startMerchantsIngest({
      merchants: [
        { ...A, legacyRoutes: false },
        { ...B, legacyRoutes: false },
      ],
      prefix: env.prefix,
      env: { REDIS_URL: env.redisUrl, INGEST_ALLOW_VOLATILE_REDIS: 'true' },
    });
    otherPort = Number(new URL(await other.app.listen({ host: '127.0.0.1', port: 0 })).port);
  });
  afterAll(async () => {
    await other?.close();
  });

  it('/callbacks answers as an unknown ref does, byte for byte, and stores nothing', async () => {
    const raw = (path: string, body: string) => rawPost(path, body, otherPort);
    const genuineA = forged(A, A, orderNo('NL'));
    const before = await stored();
    const unknown = await raw('/callbacks/m/zz', genuineA);
    expect(unknown).toMatch(/^HTTP\/1\.1 400 /);
    for (const path of ['/callbacks', '/callbacks/payin']) {
      expect(withoutDate(await raw(path, genuineA))).toBe(withoutDate(unknown));
    }
    expect(await stored()).toEqual(before);
    // A is still served on its own route.
    const served = await other.app.inject({
      method: 'POST',
      url: '/callbacks/m/a',
      headers: { 'content-type': 'application/json' },
      payload: genuineA,
    });
    expect(served.statusCode).toBe(200);
  });
});
