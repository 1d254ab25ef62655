import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { useTestEnv } from '@mcb/testkit';
import { MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';

const env = useTestEnv();
const keys = generateKeyPair();
let shuttingDown = false;
let ingest: TestIngest;

beforeAll(async () => {
  ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: env.prefix,
    keyRing: loadKeyRing([keys.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true' },
    isShuttingDown: () => shuttingDown,
  });
});
afterAll(async () => {
  await ingest?.close();
});

describe('ingest while shutting down', () => {
  it('answers new callbacks 503 fail and readiness 503, and enqueues nothing', async () => {
    shuttingDown = true;
    const record = { OrderNo: 'W1', MerchantNo: MERCHANT_NO, MerchantOrderNo: 'm', PayTime: null, state: 5 };
    const res = await ingest.app.inject({
      method: 'POST',
      url: '/callbacks',
      headers: { 'content-type': 'application/json' },
      payload: { encryptedData: encryptRecord(record, keys.publicKeyPem) },
    });
    expect([res.statusCode, res.body]).toEqual([503, 'fail']);
    const ready = await ingest.app.inject({ method: 'GET', url: '/readyz' });
    expect([ready.statusCode, ready.json().checks.shutdown]).toEqual([503, 'shutting down']);
    expect((await ingest.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect(await ingest.queue.count()).toBe(0);
  });
});
