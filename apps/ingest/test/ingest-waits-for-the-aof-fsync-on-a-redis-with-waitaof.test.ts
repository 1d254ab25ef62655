import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { startRespProxy, uniquePrefix, type RespProxy, type RespValue } from '@mcb/testkit';
import { MERCHANT_NO, startIngest, startOwnRedis, type OwnRedis, type TestIngest } from '@mcb/testkit/ingest';

// Ingest accepts a Redis whose AOF fsyncs only every second when the server has WAITAOF (Redis >= 7.2): it then
// waits for the fsync of each batch before `success`. Debian's Redis is 7.0, so a proxy in front of a real one
// plays the newer server's part: it says WAITAOF exists and answers it, as the test chooses. Everything else is
// the real Redis. The same proxy hides WAITAOF for the refusal case, whatever Redis version runs underneath.

const keys = generateKeyPair();
const keyRing = loadKeyRing([keys.privateKeyPem]);
let redis: OwnRedis;
const proxies: RespProxy[] = [];
/** What the fake WAITAOF answers: [local fsyncs, replica fsyncs]. */
let waitaofReply: [number, number] = [1, 0];

beforeAll(async () => {
  redis = await startOwnRedis(['--appendonly', 'yes', '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction']);
});
afterAll(async () => {
  for (const p of proxies) await p.close();
  await redis?.destroy();
});

const commandInfo = (exists: boolean): RespValue => [
  exists ? [Buffer.from('waitaof'), 4, [Buffer.from('noscript')], 0, 0, 0] : null,
];

async function proxy(waitaof: boolean): Promise<RespProxy> {
  const p = await startRespProxy(redis.url, (args) => {
    if (args[0] === 'COMMAND' && args[1]?.toUpperCase() === 'INFO' && args[2]?.toUpperCase() === 'WAITAOF')
      return { reply: commandInfo(waitaof) };
    if (args[0] === 'WAITAOF' && waitaof) return { reply: waitaofReply };
    return { forward: true };
  });
  proxies.push(p);
  return p;
}

const callback = (orderNo: string) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      { OrderNo: orderNo, MerchantNo: MERCHANT_NO, MerchantOrderNo: `m-${orderNo}`, PayTime: null, state: 4 },
      keys.publicKeyPem,
    ),
  });
const post = (ingest: TestIngest, orderNo: string) =>
  ingest.app
    .inject({
      method: 'POST',
      url: '/callbacks',
      headers: { 'content-type': 'application/json' },
      payload: callback(orderNo),
    })
    .then((r) => `${r.statusCode} ${r.body}`);

describe('on a Redis with WAITAOF and appendfsync everysec', () => {
  let ingest: TestIngest;
  let p: RespProxy;
  beforeAll(async () => {
    p = await proxy(true);
    ingest = await startIngest({ redisUrl: p.url, prefix: uniquePrefix('waitaof'), keyRing });
  });
  afterAll(async () => {
    await ingest?.close();
  });

  it('starts in waitaof mode and says so on /readyz', async () => {
    expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      checks: { durability: 'waitaof' },
    });
  });

  it('answers success only after WAITAOF confirmed the fsync, and the job is stored', async () => {
    waitaofReply = [1, 0];
    const before = p.counts.get('WAITAOF') ?? 0;
    expect(await Promise.all(['WA1', 'WA2', 'WA3'].map((no) => post(ingest, no)))).toEqual([
      '200 success',
      '200 success',
      '200 success',
    ]);
    expect((p.counts.get('WAITAOF') ?? 0) - before).toBeGreaterThanOrEqual(1);
    expect(await ingest.queue.getJob('payout-WA1-4')).toBeDefined();
  });

  it('answers 503 fail when WAITAOF reports no local fsync in time', async () => {
    waitaofReply = [0, 0];
    try {
      expect(await post(ingest, 'WA-NOFSYNC')).toBe('503 fail');
    } finally {
      waitaofReply = [1, 0];
    }
    // Once the fsync is confirmed again, the platform's retry is acknowledged.
    expect(await post(ingest, 'WA-NOFSYNC')).toBe('200 success');
  });
});

describe('on a Redis without WAITAOF and appendfsync everysec', () => {
  it('buildApp refuses with REDIS_NOT_DURABLE naming appendfsync', async () => {
    const p = await proxy(false);
    const err = await startIngest({ redisUrl: p.url, prefix: uniquePrefix('nowaitaof'), keyRing }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe(ErrorCodes.REDIS_NOT_DURABLE);
    expect((err as AppError).message).toMatch(/appendfsync is "everysec" and this Redis has no WAITAOF/);
  });
});
