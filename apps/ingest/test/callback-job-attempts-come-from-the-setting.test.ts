import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { useTestEnv } from '@mcb/testkit';
import { MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';

const env = useTestEnv();
const key = generateKeyPair();
let ingest: TestIngest;

beforeAll(async () => {
  ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: env.prefix,
    keyRing: loadKeyRing([key.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true', CALLBACK_JOB_ATTEMPTS: '7' },
  });
});
afterAll(async () => {
  await ingest?.close();
});

describe('CALLBACK_JOB_ATTEMPTS sets the retry budget of the jobs ingest enqueues', () => {
  it('a callback (and a variant of it under its own id) gets 7 attempts, not the default 60', async () => {
    const record = (amount: string) =>
      `{"orderno":"ATT1","merchantno":"${MERCHANT_NO}","merchantorderno":"m-ATT1","paytime":"2024-05-01T08:30:00","orderstate":6,"quantity":1.5,"fiatcurrency":${amount}}`;
    for (const amount of ['10.00', '99.00']) {
      const res = await ingest.app.inject({
        method: 'POST',
        url: '/callbacks',
        headers: { 'content-type': 'application/json' },
        payload: { encryptedData: encryptRecord(record(amount), key.publicKeyPem) },
      });
      expect(res.body).toBe('success');
    }
    const jobs = await ingest.queue.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed']);
    const mine = jobs.filter((j) => j.data.orderNo === 'ATT1');
    expect(mine).toHaveLength(2); // the second record differs: a variant job of its own
    expect(mine.map((j) => j.opts.attempts)).toEqual([7, 7]);
  });
});
