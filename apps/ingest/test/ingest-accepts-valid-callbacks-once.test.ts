import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { callbackJobSchema } from '@mcb/core/queue';
import { useTestEnv } from '@mcb/testkit';
import { MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';

const env = useTestEnv();
const current = generateKeyPair();
const previous = generateKeyPair();
let ingest: TestIngest;

beforeAll(async () => {
  // The shared Redis runs without persistence; durability itself is proven against a private Redis elsewhere.
  ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: env.prefix,
    keyRing: loadKeyRing([current.privateKeyPem, previous.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true' },
  });
});
afterAll(async () => {
  await ingest?.close();
});

const payin = (orderNo: string) =>
  `{"orderno":"${orderNo}","merchantno":"${MERCHANT_NO}","merchantorderno":"m-${orderNo}","paytime":"2024-05-01T08:30:00",` +
  `"orderstate":6,"quantity":12.345600,"fiatcurrency":100.10}`;
const payout = (orderNo: string, state = 4) =>
  `{"orderno":"${orderNo}","merchantno":"${MERCHANT_NO}","merchantorderno":"m-${orderNo}","paytime":null,"state":${state}}`;

async function post(url: string, encryptedData: string) {
  const res = await ingest.app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json' },
    payload: { encryptedData },
  });
  return { status: res.statusCode, body: res.body, contentType: res.headers['content-type'] };
}

describe('ingest accepts valid callbacks and enqueues exactly one job each', () => {
  const cases = [
    { name: 'one-block pay-in', url: '/callbacks', text: payin('PI1'), key: current, blocks: 1, jobId: 'payin-PI1-6' },
    {
      name: 'three-block pay-in',
      url: '/callbacks/payin',
      text: payin('PI3'),
      key: current,
      blocks: 3,
      jobId: 'payin-PI3-6',
    },
    {
      name: 'one-block payout',
      url: '/callbacks/payout',
      text: payout('PO1'),
      key: current,
      blocks: 1,
      jobId: 'payout-PO1-4',
    },
    {
      name: 'three-block payout',
      url: '/callbacks',
      text: payout('PO3', 5),
      key: current,
      blocks: 3,
      jobId: 'payout-PO3-5',
    },
    {
      name: 'pay-in under the previous key',
      url: '/callbacks/payin',
      text: payin('PIOLD'),
      key: previous,
      blocks: 1,
      jobId: 'payin-PIOLD-6',
    },
  ];
  for (const c of cases) {
    it(`${c.name}: 200 success and one job with exact amounts`, async () => {
      const reply = await post(c.url, encryptRecord(c.text, c.key.publicKeyPem, { minBlocks: c.blocks }));
      expect(reply).toEqual({ status: 200, body: 'success', contentType: 'text/plain; charset=utf-8' });
      const job = await ingest.queue.getJob(c.jobId);
      expect(job?.name).toBe(c.jobId.split('-')[0]);
      const data = callbackJobSchema.parse(job?.data);
      expect(data.merchantNo).toBe(MERCHANT_NO);
      if (data.kind === 'payin') expect([data.quantity, data.fiatAmount]).toEqual(['12.345600', '100.10']);
      expect(job?.opts.attempts).toBe(60);
    });
  }

  it('the same callback 10 times at once over real HTTP: 10 × success, one job', async () => {
    const address = await ingest.app.listen({ host: '127.0.0.1', port: 0 });
    const body = JSON.stringify({ encryptedData: encryptRecord(payin('DUP10'), current.publicKeyPem) });
    const replies = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const res = await fetch(`${address}/callbacks`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        return `${res.status} ${await res.text()}`;
      }),
    );
    expect(replies).toEqual(Array(10).fill('200 success'));
    const jobs = await ingest.queue.getJobs(['waiting', 'active', 'delayed', 'completed', 'failed']);
    expect(jobs.filter((j) => j.data.orderNo === 'DUP10').map((j) => j.id)).toEqual(['payin-DUP10-6']);
  });

  it('a duplicate after the first was stored is still success and adds nothing', async () => {
    const enc = encryptRecord(payout('PODUP'), current.publicKeyPem);
    expect((await post('/callbacks', enc)).body).toBe('success');
    const before = await ingest.queue.count();
    expect((await post('/callbacks/payout', encryptRecord(payout('PODUP'), current.publicKeyPem))).body).toBe(
      'success',
    );
    expect(await ingest.queue.count()).toBe(before);
  });

  it('counts accepted callbacks and the key that opened them in the metrics registry, as merchant default', async () => {
    const text = await ingest.registry.metrics();
    expect(text).toMatch(
      /ingest_callbacks_total\{route="\/callbacks\/payin",outcome="success",code="",merchant="default"\} \d+/,
    );
    expect(text).toMatch(/ingest_decrypt_key_total\{key_index="1",merchant="default"\} 1/);
    expect(text).toMatch(/ingest_callback_duration_seconds_bucket/);
  });
});
