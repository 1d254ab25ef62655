import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { isSuccessReply } from '../src/app.ts';
import { startReceiver, startSandbox, type Receiver, type ScriptedReply } from './helpers/sandbox.ts';

describe('isSuccessReply (spec: 2xx and exactly success/ok in any case, or {"code":200})', () => {
  it.each([
    [200, 'success'],
    [200, 'SUCCESS'],
    [200, 'Success'],
    [200, 'ok'],
    [201, 'OK'],
    [204, 'oK'],
    [200, '{"code":200}'],
    [200, '{ "code": 200 }'],
  ])('accepts %i %j', (status, body) => {
    expect(isSuccessReply(status, body)).toBe(true);
  });

  it.each([
    [200, 'success\n'],
    [200, ' ok'],
    [200, 'ok '],
    [200, '"success"'],
    [200, 'successful'],
    [200, ''],
    [200, '{"code":"200"}'],
    [200, '{"code":200,"msg":"ok"}'],
    [200, '{"code":0}'],
    [200, ' {"code":200}'],
    [200, 'fail'],
    [500, 'success'],
    [302, 'ok'],
    [404, '{"code":200}'],
  ])('refuses %i %j', (status, body) => {
    expect(isSuccessReply(status, body)).toBe(false);
  });
});

describe('delivery against a real receiver', () => {
  let sandbox: { app: FastifyInstance; url: string };
  let receiver: Receiver | undefined;
  beforeAll(async () => {
    // 3 minutes become 30 ms: the whole 5-attempt schedule runs in about 2 s.
    sandbox = await startSandbox({ timeScale: 6000, replyTimeoutMs: 300 });
  });
  afterEach(async () => {
    sandbox.app.sandbox.reset();
    await receiver?.close();
    receiver = undefined;
  });
  afterAll(async () => {
    await sandbox.app.close();
  });

  async function deliverWith(reply: (n: number) => ScriptedReply) {
    receiver = await startReceiver((n) => reply(n));
    const sim = sandbox.app.sandbox;
    const order = sim.createPayin({ currency: 'INR', amount: '500', callbackUrl: receiver.url });
    const { deliveries } = sim.finalize(order.orderNo, 6);
    return sim.settled(deliveries[0]!);
  }

  it.each(['success', 'SUCCESS', 'ok', '{"code":200}'])(
    'stops after one attempt when the receiver replies %j',
    async (body) => {
      const d = await deliverWith(() => ({ status: 200, body }));
      expect(d.status).toBe('delivered');
      expect(d.attempts).toHaveLength(1);
      expect(d.attempts[0]).toMatchObject({
        number: 1,
        status: 200,
        bodySnippet: body,
        outcome: 'success',
        error: null,
      });
    },
  );

  it.each<[string, ScriptedReply, string]>([
    ['success with a newline', { status: 200, body: 'success\n' }, 'body not accepted'],
    ['ok with a leading space', { status: 200, body: ' ok' }, 'body not accepted'],
    ['a string code', { status: 200, body: '{"code":"200"}' }, 'body not accepted'],
    ['another 2xx body', { status: 200, body: 'received' }, 'body not accepted'],
    ['500 with success', { status: 500, body: 'success' }, 'status 500'],
    ['no reply in time', 'hang', 'timeout'],
  ])('retries until success when the receiver first sends %s', async (_what, first, error) => {
    const d = await deliverWith((n) => (n === 0 ? first : { status: 200, body: 'success' }));
    expect(d.status).toBe('delivered');
    expect(d.attempts.map((a) => a.outcome)).toEqual(['failure', 'success']);
    expect(d.attempts[0]!.error).toBe(error);
    expect(receiver!.received[0]!.contentType).toBe('application/json');
    expect(receiver!.received[0]!.method).toBe('POST');
  });

  it('records the first 64 characters of a long reply body', async () => {
    const long = 'x'.repeat(500);
    const d = await deliverWith((n) => (n === 0 ? { status: 200, body: long } : { status: 200, body: 'ok' }));
    expect(d.attempts[0]!.bodySnippet).toBe('x'.repeat(64));
  });

  it('counts an unreachable receiver as a failed attempt with the network error', async () => {
    const sim = sandbox.app.sandbox;
    // Port 9 (discard) on loopback is closed in test environments: the connection is refused.
    const order = sim.createPayin({ currency: 'INR', amount: '1', callbackUrl: 'http://127.0.0.1:9/none' });
    const d = sim.finalize(order.orderNo, 6).deliveries[0]!;
    await import('@mcb/testkit').then(({ waitFor }) => waitFor(() => d.attempts.length >= 1, { timeoutMs: 5000 }));
    expect(d.attempts[0]).toMatchObject({ status: null, outcome: 'failure' });
    expect(d.attempts[0]!.error).toMatch(/ECONNREFUSED|connect/i);
  });
});
