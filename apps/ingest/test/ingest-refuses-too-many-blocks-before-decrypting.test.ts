import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { useTestEnv } from '@mcb/testkit';
import { captureLogger, MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';

// Decryption is the CPU cost of a callback: a body of many RSA blocks must be refused by its length, before any
// block is decrypted. The body limit here is raised so that the block limit (INGEST_MAX_BLOCKS) is what refuses.
const env = useTestEnv();
const keys = generateKeyPair();
const { logger, lines } = captureLogger();
let ingest: TestIngest;

beforeAll(async () => {
  ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: env.prefix,
    keyRing: loadKeyRing([keys.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true', INGEST_BODY_LIMIT: '65536', INGEST_MAX_BLOCKS: '4' },
    logger,
  });
});
afterAll(async () => {
  await ingest?.close();
});

const record = (orderNo: string) =>
  JSON.stringify({
    OrderNo: orderNo,
    MerchantNo: MERCHANT_NO,
    MerchantOrderNo: `m-${orderNo}`,
    PayTime: null,
    state: 4,
  });
const post = async (encryptedData: string) => {
  const res = await ingest.app.inject({
    method: 'POST',
    url: '/callbacks',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ encryptedData }),
  });
  return `${res.statusCode} ${res.body}`;
};

describe('ingest bounds decryption by the number of blocks', () => {
  it('refuses 20 blocks with the uniform 400 fail, by length, without decrypting any block', async () => {
    // A valid record split over 20 blocks: had it been decrypted, it would have been accepted.
    expect(await post(encryptRecord(record('BLK20'), keys.publicKeyPem, { minBlocks: 20 }))).toBe('400 fail');
    // Random blocks: decrypting them would fail as JSON_INVALID; the length check answers first.
    expect(await post(Buffer.alloc(256 * 20, 7).toString('base64'))).toBe('400 fail');
    const refusals = lines.filter((l) => l.includes('callback refused'));
    expect(refusals).toHaveLength(2);
    for (const line of refusals) expect(line).toContain('CALLBACK_CIPHERTEXT_LENGTH');
    expect(lines.join('')).not.toContain('CALLBACK_JSON_INVALID');
    expect(await ingest.queue.count()).toBe(0);
  });

  it('accepts a record split over as many blocks as allowed', async () => {
    expect(await post(encryptRecord(record('BLK4'), keys.publicKeyPem, { minBlocks: 4 }))).toBe('200 success');
    expect((await ingest.queue.getJob('payout-BLK4-4'))?.data.orderNo).toBe('BLK4');
  });
});
