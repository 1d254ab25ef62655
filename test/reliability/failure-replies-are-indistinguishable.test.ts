import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { uniquePrefix } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngest, type TestIngest } from '@mcb/testkit/ingest';
import { callbackBody, encryptBytes, payinRecord } from './helpers/callbacks.ts';
import { createTestKeys, type TestKeys } from './helpers/keys.ts';
import { startOwnRedis, type OwnRedis } from '@mcb/testkit';

// No oracle (DESIGN invariant 4): decryption failure, JSON failure, schema failure and merchant mismatch get
// byte-identical replies (status, headers except Date, body) over a real socket. The timing of each kind is
// printed, not asserted: it is a figure to watch, and a shared 2-core CI machine is too noisy to gate on it.
const MERCHANT_NO = 'M100001';
const PER_KIND = 200;

type Kind = 'decrypt' | 'json' | 'schema' | 'merchant';

interface Reply {
  status: number;
  headers: string;
  body: string;
  ms: number;
}

function post(port: number, body: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const req = http.request(
      { host: '127.0.0.1', port, path: '/callbacks', method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const ms = Number(process.hrtime.bigint() - started) / 1e6;
          // Raw header pairs in order, Date excluded (it changes every second).
          const pairs: string[] = [];
          for (let i = 0; i < res.rawHeaders.length; i += 2) {
            if (res.rawHeaders[i]!.toLowerCase() !== 'date')
              pairs.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
          }
          resolve({
            status: res.statusCode ?? 0,
            headers: pairs.join('\n'),
            body: Buffer.concat(chunks).toString('utf8'),
            ms,
          });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function stats(values: number[]): { mean: number; p50: number; p99: number } {
  const s = [...values].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? 0;
  return { mean: s.reduce((a, b) => a + b, 0) / s.length, p50: at(0.5), p99: at(0.99) };
}

describe('no padding oracle', () => {
  let keys: TestKeys;
  let redis: OwnRedis;
  let ingest: TestIngest;
  let port: number;

  beforeAll(async () => {
    keys = createTestKeys();
    redis = await startOwnRedis();
    ingest = await startIngest({ redisUrl: redis.url, prefix: uniquePrefix('rel-oracle'), keyRing: keys.keyRing });
    await ingest.app.listen({ host: '127.0.0.1', port: 0 });
    port = (ingest.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await ingest?.close();
    await redis?.destroy();
    keys?.remove();
  });

  it('decryption, JSON, schema and merchant failures get identical replies (timings printed)', async () => {
    const k = 256; // 2048-bit key: one block
    const make: Record<Kind, () => string> = {
      // a tampered block under our key: implicit rejection turns it into garbage, which then fails as JSON
      decrypt: () => {
        const ct = Buffer.from(encryptRecord1(), 'base64');
        ct[k - 1] = ct[k - 1]! ^ 0x01;
        return JSON.stringify({ encryptedData: ct.toString('base64') });
      },
      json: () =>
        JSON.stringify({ encryptedData: encryptBytes(Buffer.from('this is not json {', 'utf8'), keys.publicKeyPem) }),
      schema: () => callbackBody({ OrderNo: 'X1', MerchantNo: MERCHANT_NO, OrderState: 'six' }, keys.publicKeyPem),
      merchant: () => callbackBody(payinRecord('M999999'), keys.publicKeyPem),
    };
    function encryptRecord1(): string {
      return JSON.parse(callbackBody(payinRecord(MERCHANT_NO), keys.publicKeyPem)).encryptedData as string;
    }
    // Warm up the route and the key, then interleave kinds so drift affects all alike.
    for (let i = 0; i < 20; i++) await post(port, make.schema());
    const order: Kind[] = [];
    for (let i = 0; i < PER_KIND; i++) order.push('decrypt', 'json', 'schema', 'merchant');
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const replies: Record<Kind, Reply[]> = { decrypt: [], json: [], schema: [], merchant: [] };
    for (const kind of order) replies[kind].push(await post(port, make[kind]()));

    const reference = replies.decrypt[0]!;
    expect(reference.status).toBe(400);
    expect(reference.body).toBe('fail');
    for (const [kind, list] of Object.entries(replies)) {
      for (const r of list)
        expect({ kind, status: r.status, headers: r.headers, body: r.body }).toEqual({
          kind,
          status: reference.status,
          headers: reference.headers,
          body: reference.body,
        });
    }
    const lines = (Object.keys(replies) as Kind[]).map((kind) => {
      const s = stats(replies[kind].map((r) => r.ms));
      return `  ${kind.padEnd(9)} mean ${s.mean.toFixed(3)} ms  p50 ${s.p50.toFixed(3)} ms  p99 ${s.p99.toFixed(3)} ms`;
    });
    const means = (Object.keys(replies) as Kind[]).map((kind) => stats(replies[kind].map((r) => r.ms)).mean);
    console.log(
      [
        `oracle timings over ${PER_KIND} requests per kind (reported, not asserted):`,
        ...lines,
        `  largest difference of means ${(Math.max(...means) - Math.min(...means)).toFixed(3)} ms`,
      ].join('\n'),
    );
  });
});
