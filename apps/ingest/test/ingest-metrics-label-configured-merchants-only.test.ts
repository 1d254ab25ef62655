import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '@mcb/testkit';
import {
  callbackFor,
  payinRecord,
  startMerchantsIngest,
  testMerchant,
  type MerchantsIngest,
} from '@mcb/testkit/ingest';

// The `merchant` label takes configured refs only: a stranger guessing refs must not grow /metrics by one series per
// guess (each series costs memory in ingest and in Prometheus for as long as it is kept).
const env = useTestEnv();
const A = testMerchant('a', 'M-A-1', true);
const B = testMerchant('b', 'M-B-2');
let ingest: MerchantsIngest;

beforeAll(async () => {
  ingest = await startMerchantsIngest({
    merchants: [A, B],
    prefix: env.prefix,
    env: { REDIS_URL: env.redisUrl, INGEST_ALLOW_VOLATILE_REDIS: 'true' },
  });
});
afterAll(async () => {
  await ingest?.close();
});

const post = (url: string, payload: string) =>
  ingest.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload });

/** Every series of /metrics: its name and labels, without its value. */
async function series(): Promise<Set<string>> {
  const text = await ingest.registry.metrics();
  return new Set(
    text
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('#'))
      .map((l) => l.slice(0, l.lastIndexOf(' '))),
  );
}

/** A ref a stranger might guess: a well-formed one, or anything a URL segment can carry. */
function randomRef(i: number): string {
  const kinds = [
    () => randomBytes(1 + (i % 16)).toString('hex'),
    () => `m-${i}-${randomBytes(3).toString('hex')}`,
    () => encodeURIComponent(`X${randomBytes(4).toString('base64')}`),
    () => `%E2%80%AE${i}`,
  ];
  return kinds[i % kinds.length]!();
}

describe('ingest metrics by merchant', () => {
  it("count each merchant's acknowledged callbacks from 0, before its first one (so increase() sees the first)", async () => {
    const text = await ingest.registry.metrics();
    for (const [route, merchant] of [
      ['/callbacks/m/:ref', 'a'],
      ['/callbacks/m/:ref/payin', 'a'],
      ['/callbacks/m/:ref/payout', 'a'],
      ['/callbacks/m/:ref', 'b'],
      ['/callbacks/m/:ref/payin', 'b'],
      ['/callbacks/m/:ref/payout', 'b'],
      // A serves the legacy routes too; B does not.
      ['/callbacks', 'a'],
      ['/callbacks/payin', 'a'],
      ['/callbacks/payout', 'a'],
    ])
      expect(text).toContain(
        `ingest_callbacks_total{route="${route}",outcome="success",code="",merchant="${merchant}"} 0\n`,
      );
    expect(text).not.toMatch(/ingest_callbacks_total\{route="\/callbacks(\/payin|\/payout)?",[^}]*merchant="b"\}/);
  });

  it('label each callback with its configured ref', async () => {
    expect((await post('/callbacks/m/a', callbackFor(A, payinRecord(A, 'LBL-A')))).statusCode).toBe(200);
    expect((await post('/callbacks/m/b/payin', callbackFor(B, payinRecord(B, 'LBL-B')))).statusCode).toBe(200);
    const text = await ingest.registry.metrics();
    expect(text).toMatch(
      /ingest_callbacks_total\{route="\/callbacks\/m\/:ref",outcome="success",code="",merchant="a"\} 1/,
    );
    expect(text).toMatch(
      /ingest_callbacks_total\{route="\/callbacks\/m\/:ref\/payin",outcome="success",code="",merchant="b"\} 1/,
    );
    expect(text).toMatch(/ingest_decrypt_key_total\{key_index="0",merchant="b"\} 1/);
  });

  it('1,000 requests to random refs add no series to /metrics, and are counted under one label', async () => {
    const genuineA = callbackFor(A, payinRecord(A, 'RND-1'));
    const routes = ['', '/payin', '/payout'];
    // 1. One guess on each merchant route first: the series guesses are counted under then exist.
    for (const route of routes) expect((await post(`/callbacks/m/first-guess${route}`, genuineA)).statusCode).toBe(400);
    const before = await series();
    // 2. A thousand guesses, spread over the merchant routes.
    const refs = Array.from({ length: 1000 }, (_, i) => randomRef(i));
    for (const [i, ref] of refs.entries()) {
      const res = await post(`/callbacks/m/${ref}${routes[i % 3]}`, genuineA);
      expect([res.statusCode, res.body]).toEqual([400, 'fail']);
    }
    // 3. Not one series more, no label value that a guess chose, and every guess counted under `_unknown`.
    expect([...(await series())].filter((s) => !before.has(s))).toEqual([]);
    const text = await ingest.registry.metrics();
    // Every label's values but the histograms' bucket bounds (`le`), which are numbers of ours.
    const labelValues = new Set([...text.matchAll(/(\w+)="([^"]*)"/g)].filter((m) => m[1] !== 'le').map((m) => m[2]));
    expect(refs.filter((ref) => labelValues.has(decodeURIComponent(ref)) || labelValues.has(ref))).toEqual([]);
    const unknown = [...text.matchAll(/^ingest_callbacks_total\{[^}]*merchant="_unknown"\} (\d+)$/gm)];
    expect(unknown.reduce((sum, m) => sum + Number(m[1]), 0)).toBe(1003);
  });
});
