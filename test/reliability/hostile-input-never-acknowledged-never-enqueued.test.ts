import { callbackJobSchema } from '@mcb/core/queue';
import { decodeCallback } from '@mcb/core/callback';
import { isAppError } from '@mcb/core/errors';
import { uniquePrefix } from '@mcb/testkit';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngest, type TestIngest } from '@mcb/testkit/ingest';
import { callbackBody, encryptBytes, payinRecord } from './helpers/callbacks.ts';
import { createTestKeys, type TestKeys } from './helpers/keys.ts';
import { startOwnRedis, type OwnRedis } from '@mcb/testkit';

// Hostile input, property-based: the codec and the live ingest route never acknowledge invalid input, never
// enqueue it, never crash (no 500, no throw other than a CALLBACK_* AppError), and never touch Object.prototype.
const MERCHANT_NO = 'M100001'; // the harness's merchant number
const OTHER_MERCHANT = 'M999999';

const protoNames = () => Object.getOwnPropertyNames(Object.prototype).sort().join(',');
const PROTO_BEFORE = protoNames();
const pristine = () => protoNames() === PROTO_BEFORE && ({} as Record<string, unknown>).polluted === undefined;

/** Keys an attacker would try, at the top level of a record. */
const dangerousKey = fc.constantFrom(
  '__proto__',
  'constructor',
  'prototype',
  '__defineGetter__',
  'hasOwnProperty',
  'toString',
);
const hugeNumberText = fc.constantFrom(
  '1e400',
  '-1e400',
  '123456789012345678901234567890.123456789012345678901234567890',
  '9007199254740993',
  '0.1e-400',
  '1E+308',
  '4.9e-325',
);

/** A valid record's JSON text with a raw-text value spliced in for `field` (keeps numbers' exact text). */
function withRawField(record: Record<string, unknown>, field: string, rawValue: string): string {
  const marker = `__RAW_${field}__`;
  return JSON.stringify({ ...record, [field]: marker }).replace(`"${marker}"`, rawValue);
}

/** Mutations that make a valid pay-in record invalid, whatever else is in it. */
const breakingMutation: fc.Arbitrary<(r: Record<string, unknown>) => string> = fc.oneof(
  fc
    .constantFrom('OrderNo', 'MerchantNo', 'MerchantOrderNo', 'OrderState', 'Quantity', 'FiatCurrency', 'PayTime')
    .map(
      (field) => (r: Record<string, unknown>) =>
        JSON.stringify(Object.fromEntries(Object.entries(r).filter(([k]) => k !== field))),
    ),
  fc
    .record({
      field: fc.constantFrom('OrderNo', 'MerchantNo', 'OrderState', 'Quantity', 'FiatCurrency'),
      value: fc.oneof(
        fc.constant(null),
        fc.boolean(),
        fc.array(fc.integer(), { maxLength: 3 }),
        fc.object({ maxDepth: 2 }),
      ),
    })
    .map(
      ({ field, value }) =>
        (r: Record<string, unknown>) =>
          JSON.stringify({ ...r, [field]: value }),
    ),
  fc
    .integer()
    .filter((s) => s !== 3 && s !== 6)
    .map((s) => (r: Record<string, unknown>) => JSON.stringify({ ...r, OrderState: s })),
  fc.constant((r: Record<string, unknown>) => JSON.stringify({ ...r, MerchantNo: OTHER_MERCHANT })),
  fc.constant((r: Record<string, unknown>) => JSON.stringify({ ...r, orderno: 'X1' })), // names differing only in case
  fc
    .stringMatching(/[^A-Za-z0-9_.-]/)
    .map((bad) => (r: Record<string, unknown>) => JSON.stringify({ ...r, OrderNo: `A${bad}` })),
  fc.constant((r: Record<string, unknown>) => withRawField(r, 'Quantity', '-1.5')),
  fc.string({ maxLength: 20 }).map((t) => (r: Record<string, unknown>) => JSON.stringify({ ...r, PayTime: `x${t}` })),
);

/** Invalid records, encrypted with our key (near-valid: decryption succeeds, everything after must refuse). */
const invalidEncryptedRecord = (publicKeyPem: string): fc.Arbitrary<string> =>
  fc.oneof(
    // a valid record broken one way, with dangerous keys and huge numbers mixed in
    fc
      .record({
        mutate: breakingMutation,
        key: dangerousKey,
        value: fc.oneof(fc.object({ maxDepth: 2 }), fc.constant({ polluted: true })),
        huge: hugeNumberText,
      })
      .map(({ mutate, key, value, huge }) => {
        const text = mutate(payinRecord(MERCHANT_NO));
        // JSON.parse keeps "__proto__" as an own key; splice it (and a huge number) in as raw text.
        const spliced = text.replace(/^\{/, `{${JSON.stringify(key)}:${JSON.stringify(value)},"Extra":${huge},`);
        return callbackBody(spliced, publicKeyPem);
      }),
    // any JSON value at all as the "record"
    fc.jsonValue({ maxDepth: 4 }).map((v) => callbackBody(JSON.stringify(v) ?? 'null', publicKeyPem)),
    // random plaintext bytes
    fc
      .uint8Array({ minLength: 1, maxLength: 600 })
      .map((b) => JSON.stringify({ encryptedData: encryptBytes(Buffer.from(b), publicKeyPem) })),
    // wrong encodings of an otherwise valid record: UTF-16, Latin-1 with a non-ASCII character (not UTF-8)
    fc.constantFrom('utf16le' as const, 'latin1' as const).map((enc) => {
      const text = JSON.stringify(payinRecord(MERCHANT_NO, { MerchantOrderNo: 'Mé1' }));
      return JSON.stringify({ encryptedData: encryptBytes(Buffer.from(text, enc), publicKeyPem) });
    }),
    // deeply nested values inside the record
    fc
      .integer({ min: 50, max: 900 })
      .map((depth) =>
        callbackBody(
          `{"OrderNo":${'['.repeat(depth)}${']'.repeat(depth)},"MerchantNo":"${MERCHANT_NO}"}`,
          publicKeyPem,
        ),
      ),
  );

/** Bodies that are wrong before any decryption: not JSON, not the envelope, bad Base64, wrong lengths. */
const invalidEnvelope: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b).toString('latin1')),
  fc.jsonValue({ maxDepth: 5 }).map((v) => JSON.stringify(v) ?? 'null'),
  fc
    .record({
      encryptedData: fc.oneof(fc.string(), fc.base64String({ maxLength: 400 }), fc.integer(), fc.constant(null)),
    })
    .map((o) => JSON.stringify(o)),
  fc
    .uint8Array({ minLength: 256, maxLength: 256 })
    .map((b) => JSON.stringify({ encryptedData: Buffer.from(b).toString('base64') })),
  fc
    .uint8Array({ minLength: 1, maxLength: 700 })
    .filter((b) => b.length % 256 !== 0)
    .map((b) => JSON.stringify({ encryptedData: Buffer.from(b).toString('base64') })),
  fc.integer({ min: 100, max: 3000 }).map((d) => `{"encryptedData":${'['.repeat(d)}${']'.repeat(d)}}`),
  fc.constantFrom(
    '{"__proto__":{"polluted":true},"encryptedData":"AAAA"}',
    '{"constructor":{"prototype":{"polluted":true}}}',
    '{"encryptedData":"QUJD\\n"}',
  ),
);

describe('hostile input', () => {
  let keys: TestKeys;
  let redis: OwnRedis;
  let ingest: TestIngest;
  let probe: Redis;
  const prefix = uniquePrefix('rel-hostile');

  beforeAll(async () => {
    keys = createTestKeys();
    redis = await startOwnRedis();
    ingest = await startIngest({ redisUrl: redis.url, prefix, keyRing: keys.keyRing });
    probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    probe?.disconnect();
    await ingest?.close();
    await redis?.destroy();
    keys?.remove();
  });

  const jobKeys = async () =>
    (await probe.keys(`${prefix}:callbacks:*`)).filter((k) => /:(payin|payout)-/.test(k) || k.endsWith(':wait'));

  it('codec: any body decodes to a valid job for our merchant or throws a CALLBACK_* AppError, and Object.prototype is untouched', () => {
    const anyBody = fc.oneof(
      invalidEnvelope.map((text) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          return text;
        }
      }),
      invalidEncryptedRecord(keys.publicKeyPem).map((t) => JSON.parse(t) as unknown),
      // possibly valid: huge numbers and dangerous keys on an otherwise valid record
      fc.record({ key: dangerousKey, huge: hugeNumberText }).map(({ key, huge }) => {
        const text = withRawField(payinRecord(MERCHANT_NO), 'FiatCurrency', huge).replace(
          /^\{/,
          `{${JSON.stringify(key)}:{"polluted":true},`,
        );
        return JSON.parse(callbackBody(text, keys.publicKeyPem)) as unknown;
      }),
      fc.anything(),
    );
    fc.assert(
      fc.property(anyBody, (body) => {
        try {
          const job = decodeCallback(body, { keyRing: keys.keyRing, merchantNo: MERCHANT_NO });
          const parsed = callbackJobSchema.safeParse(job);
          if (!parsed.success || job.merchantNo !== MERCHANT_NO) return false;
          if (job.kind === 'payin' && !/^\d+(\.\d+)?$/.test(job.fiatAmount)) return false;
        } catch (e) {
          if (!isAppError(e) || !e.code.startsWith('CALLBACK_')) throw e;
        }
        return pristine();
      }),
      { numRuns: 400 },
    );
    expect(pristine()).toBe(true);
  });

  it('live route: invalid bodies get 400/413/415 `fail`, never a 2xx or a 500, and no job is stored', async () => {
    const route = fc.constantFrom('/callbacks', '/callbacks/payin', '/callbacks/payout');
    const contentType = fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json; charset=utf-16',
    );
    const cases = fc.oneof(
      fc.record({ url: route, type: contentType, body: invalidEnvelope }),
      fc.record({ url: route, type: fc.constant('application/json'), body: invalidEncryptedRecord(keys.publicKeyPem) }),
      // over the body limit (8 KiB), with valid-looking content
      fc.record({
        url: route,
        type: fc.constant('application/json'),
        body: fc.integer({ min: 8200, max: 200_000 }).map((n) => `{"encryptedData":"${'A'.repeat(n)}"}`),
      }),
    );
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(cases, async ({ url, type, body }) => {
        const res = await ingest.app.inject({ method: 'POST', url, headers: { 'content-type': type }, payload: body });
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        return [400, 413, 415].includes(res.statusCode) && res.body === 'fail' && pristine();
      }),
      { numRuns: 600 },
    );
    console.log(`hostile input: live route replies ${[...statuses].map(([s, n]) => `${s}=${n}`).join(' ')}`);
    expect(await jobKeys()).toEqual([]);
    expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);

    // Control: the same route and counting do see a valid callback, so "no job" above is not a blind spot.
    const res = await ingest.app.inject({
      method: 'POST',
      url: '/callbacks',
      headers: { 'content-type': 'application/json' },
      payload: callbackBody(payinRecord(MERCHANT_NO), keys.publicKeyPem),
    });
    expect([res.statusCode, res.body]).toEqual([200, 'success']);
    expect((await jobKeys()).filter((k) => k.includes(':payin-'))).toHaveLength(1);
  });
});
