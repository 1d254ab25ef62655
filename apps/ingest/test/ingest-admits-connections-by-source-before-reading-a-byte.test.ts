import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { uniquePrefix, useTestEnv, waitFor } from '@mcb/testkit';
import { captureLogger, MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';

// Who may hold a connection to the one public listener: only sources in INGEST_ALLOWED_SOURCES (when set), at most
// INGEST_MAX_CONNECTIONS_PER_ADDRESS per source, decided when the connection opens and before a byte is read; a
// body must arrive within INGEST_BODY_TIMEOUT of its headers. Every refusal is counted; the log gets one summary per
// interval, not one line per connection. On Linux all of 127.0.0.0/8 is loopback, so 127.0.0.1 and 127.0.0.2 are
// two sources on one machine.
const env = useTestEnv();
const keys = generateKeyPair();
const opened: TestIngest[] = [];
afterAll(async () => {
  for (const i of opened) await i.close();
});

async function listen(
  extra: Record<string, string>,
  opts: { host?: string; logger?: ReturnType<typeof captureLogger>['logger'] } = {},
) {
  const ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: uniquePrefix('admit'),
    keyRing: loadKeyRing([keys.privateKeyPem]),
    env: { INGEST_ALLOW_VOLATILE_REDIS: 'true', ...extra },
    logger: opts.logger,
    refusalLogIntervalMs: 60_000,
  });
  opened.push(ingest);
  await ingest.app.listen({ port: 0, host: opts.host ?? '127.0.0.1' });
  return { ingest, port: (ingest.app.server.address() as AddressInfo).port };
}

const body = (orderNo: string) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      { OrderNo: orderNo, MerchantNo: MERCHANT_NO, MerchantOrderNo: `m-${orderNo}`, PayTime: null, state: 4 },
      keys.publicKeyPem,
    ),
  });
const request = (orderNo: string) => {
  const b = body(orderNo);
  return `POST /callbacks HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\nConnection: close\r\n\r\n${b}`;
};

/** A raw client from `localAddress`: what it was sent back, and when the server closed it. */
interface RawClient {
  socket: Socket;
  reply: () => string;
  closed: Promise<number>;
}
function rawClient(
  port: number,
  opts: { host?: string; localAddress?: string; send?: string; trickle?: string },
): RawClient {
  const socket = connect({ port, host: opts.host ?? '127.0.0.1', localAddress: opts.localAddress });
  let received = '';
  let timer: NodeJS.Timeout | undefined;
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (received += d));
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) =>
    socket.on('close', () => {
      clearInterval(timer);
      resolve(Date.now());
    }),
  );
  socket.on('connect', () => {
    if (opts.send) socket.write(opts.send);
    if (opts.trickle) timer = setInterval(() => socket.writable && socket.write(opts.trickle!), 100);
  });
  return { socket, reply: () => received, closed };
}
/** A whole request from `localAddress`; resolves with the reply's status line and body, or '' when closed unanswered. */
async function send(port: number, orderNo: string, localAddress: string, host?: string): Promise<string> {
  const c = rawClient(port, { host, localAddress, send: request(orderNo) });
  await c.closed;
  const reply = c.reply();
  return reply === '' ? '' : `${reply.split('\r\n')[0]} ${reply.slice(reply.indexOf('\r\n\r\n') + 4)}`;
}
const cuts = async (i: TestIngest) =>
  Object.fromEntries(
    (await i.registry.getSingleMetric('ingest_connections_cut_total')!.get()).values.map((v) => [
      v.labels.reason,
      v.value,
    ]),
  );
const callbacksSeen = async (i: TestIngest) =>
  (await i.registry.getSingleMetric('ingest_callbacks_total')!.get()).values.reduce((n, v) => n + v.value, 0);
const openGauge = async (i: TestIngest) =>
  (await i.registry.getSingleMetric('ingest_connections_open')!.get()).values[0]?.value;

describe('INGEST_ALLOWED_SOURCES', () => {
  it('closes a connection from outside the list before reading its request, counts it, and serves the listed source', async () => {
    const { logger, lines } = captureLogger();
    const { ingest, port } = await listen({ INGEST_ALLOWED_SOURCES: '127.0.0.2/32' }, { logger });
    // A whole genuine callback, sent at once from an address outside the list: never read, never answered.
    const outsiders = await Promise.all(Array.from({ length: 20 }, (_, i) => send(port, `OUT-${i}`, '127.0.0.1')));
    expect(outsiders).toEqual(Array(20).fill(''));
    expect(await send(port, 'LISTED-1', '127.0.0.2')).toBe('HTTP/1.1 200 OK success');
    expect(await cuts(ingest)).toEqual({ source_not_allowed: 20 });
    expect(await callbacksSeen(ingest)).toBe(1);
    expect(await ingest.queue.count()).toBe(1);

    // Logged once at the first refusal, then summed: the next line comes at the interval (here: at close).
    const refusalLines = () =>
      lines
        .filter((l) => l.includes('connections refused or cut'))
        .map((l) => JSON.parse(l) as { refused: number; byReason: Record<string, number>; topAddresses: unknown[] });
    expect(refusalLines()).toHaveLength(1);
    await ingest.app.close();
    expect(refusalLines().map((l) => l.refused)).toEqual([1, 19]);
    expect(refusalLines()[1]).toMatchObject({
      byReason: { source_not_allowed: 19 },
      topAddresses: [{ address: '127.0.0.1', count: 19 }],
    });
  });

  it('checks IPv4 sources arriving IPv4-mapped on a dual-stack listener, and IPv6 sources', async () => {
    const v4only = await listen({ INGEST_ALLOWED_SOURCES: '127.0.0.2' }, { host: '::' });
    expect(await send(v4only.port, 'MAPPED-OUT', '127.0.0.1')).toBe('');
    expect(await send(v4only.port, 'MAPPED-IN', '127.0.0.2')).toBe('HTTP/1.1 200 OK success');
    expect(await send(v4only.port, 'V6-OUT', '::1', '::1')).toBe('');
    expect(await cuts(v4only.ingest)).toEqual({ source_not_allowed: 2 });

    const v6 = await listen({ INGEST_ALLOWED_SOURCES: '::1/128' }, { host: '::' });
    expect(await send(v6.port, 'V6-IN', '::1', '::1')).toBe('HTTP/1.1 200 OK success');
    expect(await send(v6.port, 'V4-OUT', '127.0.0.1')).toBe('');
  });
});

describe('INGEST_MAX_CONNECTIONS_PER_ADDRESS', () => {
  it('refuses a source its connection beyond the limit when it opens, while another source is served, and admits it again once one closes', async () => {
    const { ingest, port } = await listen({ INGEST_MAX_CONNECTIONS_PER_ADDRESS: '3', INGEST_BODY_TIMEOUT: '10s' });
    const holders = Array.from({ length: 3 }, () => rawClient(port, { localAddress: '127.0.0.1' }));
    await waitFor(async () => (await openGauge(ingest)) === 3, { timeoutMs: 5000, message: 'holders never admitted' });

    expect(await send(port, 'FOURTH', '127.0.0.1')).toBe('');
    expect(await send(port, 'OTHER-SOURCE', '127.0.0.2')).toBe('HTTP/1.1 200 OK success');
    expect(await cuts(ingest)).toEqual({ address_limit: 1 });
    expect(await ingest.queue.count()).toBe(1);

    holders[0]!.socket.destroy();
    await waitFor(async () => (await openGauge(ingest)) === 2, {
      timeoutMs: 5000,
      message: 'closed holder never released',
    });
    expect(await send(port, 'AFTER-RELEASE', '127.0.0.1')).toBe('HTTP/1.1 200 OK success');
    for (const h of holders) h.socket.destroy();
  });
});

describe('INGEST_BODY_TIMEOUT', () => {
  // The request bound stays at its 10 s default: only the body deadline can cut these within seconds.
  const BODY_TIMEOUT_MS = 500;
  const CUT_WITHIN_MS = BODY_TIMEOUT_MS + 2500;

  it('cuts a body trickled after complete headers with 408 fail within the deadline, also one already answered 415', async () => {
    const { ingest, port } = await listen({ INGEST_BODY_TIMEOUT: `${BODY_TIMEOUT_MS}ms` });
    const headers = (type: string) =>
      `POST /callbacks HTTP/1.1\r\nHost: ingest\r\nContent-Type: ${type}\r\nContent-Length: 4000\r\n\r\n`;
    const started = Date.now();
    const json = rawClient(port, { send: `${headers('application/json')}{`, trickle: ' ' });
    // slowhttptest -B sends a form body: fastify answers 415 at once, and Node would go on reading the body.
    const form = rawClient(port, { send: `${headers('application/x-www-form-urlencoded')}a=`, trickle: 'b' });
    const [jsonClosed, formClosed] = await Promise.all([json.closed, form.closed]);
    expect(jsonClosed - started).toBeLessThan(CUT_WITHIN_MS);
    expect(formClosed - started).toBeLessThan(CUT_WITHIN_MS);
    expect(json.reply()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[\s\S]*\r\n\r\nfail$/);
    expect(form.reply()).toMatch(/^HTTP\/1\.1 415 Unsupported Media Type\r\n[\s\S]*\r\n\r\nfail$/);
    expect(await cuts(ingest)).toEqual({ body_timeout: 2 });
    expect(await send(port, 'AFTER-SLOW-BODIES', '127.0.0.1')).toBe('HTTP/1.1 200 OK success');
  });

  it('does not cut a body that arrived in time while the process was too busy to read it', async () => {
    const { ingest, port } = await listen({ INGEST_BODY_TIMEOUT: '300ms' });
    const whole = request('LAGGED-1');
    const split = whole.indexOf('\r\n\r\n') + 14;
    const headersParsed = new Promise((resolve) => ingest.app.server.once('request', resolve));
    const client = rawClient(port, { send: whole.slice(0, split) });
    await headersParsed;
    // The rest of the body reaches the kernel at once, but this process (the listener's) is then busy for twice the
    // deadline, so the deadline's timer comes due before the event loop has read the bytes that were there in time.
    client.socket.write(whole.slice(split));
    const busyUntil = Date.now() + 600;
    while (Date.now() < busyUntil);
    await client.closed;
    expect(client.reply()).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nsuccess$/);
    expect(await cuts(ingest)).toEqual({});
  });
});
