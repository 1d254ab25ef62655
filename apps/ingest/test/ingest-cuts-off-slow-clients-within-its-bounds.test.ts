import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { uniquePrefix, useTestEnv, waitFor } from '@mcb/testkit';
import { MERCHANT_NO, startIngest, type TestIngest } from '@mcb/testkit/ingest';

// Ingest is the one listener on the internet. A client that sends its headers and then trickles the body (or the
// headers) one byte at a time, or opens a socket and says nothing, must be cut off within the configured bounds,
// while genuine callbacks sent at the same time are acknowledged; and no more than INGEST_MAX_CONNECTIONS stay open.
// (Admission by source address is in ingest-admits-connections-by-source-before-reading-a-byte.test.ts; every client
// here comes from 127.0.0.1, so the per-address limit is off.)
const env = useTestEnv();
const keys = generateKeyPair();
const REQUEST_TIMEOUT_MS = 1000;
// Node checks the request bounds every connectionsCheckingInterval (at most 1 s, here 125 ms): room for it and a
// loaded machine, far below the "forever" of an unbounded listener.
const CUT_OFF_WITHIN_MS = REQUEST_TIMEOUT_MS + 2500;
const bounds = {
  INGEST_ALLOW_VOLATILE_REDIS: 'true',
  INGEST_HEADERS_TIMEOUT: '500ms',
  INGEST_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
  // Half the request bound, so a trickled body is cut by its own deadline (counted body_timeout), never by the race.
  INGEST_BODY_TIMEOUT: '500ms',
  INGEST_MAX_CONNECTIONS_PER_ADDRESS: '0',
  INGEST_IDLE_TIMEOUT: '1s',
  INGEST_KEEPALIVE_TIMEOUT: '500ms',
};

interface Listening {
  ingest: TestIngest;
  port: number;
  connections(): Promise<number>;
}
const opened: Listening[] = [];

async function listen(extra: Record<string, string> = {}): Promise<Listening> {
  const ingest = await startIngest({
    redisUrl: env.redisUrl,
    prefix: uniquePrefix('bounds'),
    keyRing: loadKeyRing([keys.privateKeyPem]),
    env: { ...bounds, ...extra },
  });
  await ingest.app.listen({ port: 0, host: '127.0.0.1' });
  const port = (ingest.app.server.address() as AddressInfo).port;
  const connections = () =>
    new Promise<number>((resolve, reject) => ingest.app.server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
  const l = { ingest, port, connections };
  opened.push(l);
  return l;
}

afterAll(async () => {
  for (const l of opened) await l.ingest.close();
});

const callback = (orderNo: string) =>
  JSON.stringify({
    encryptedData: encryptRecord(
      { OrderNo: orderNo, MerchantNo: MERCHANT_NO, MerchantOrderNo: `m-${orderNo}`, PayTime: null, state: 4 },
      keys.publicKeyPem,
    ),
  });
const send = async (port: number, orderNo: string) => {
  const res = await fetch(`http://127.0.0.1:${port}/callbacks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: callback(orderNo),
  });
  return `${res.status} ${await res.text()}`;
};

/** A raw client: what it was sent back and when the server closed it. */
interface RawClient {
  socket: Socket;
  reply: () => string;
  closed: Promise<number>;
}
function rawClient(port: number, first: string, trickle?: string): RawClient {
  const socket = connect(port, '127.0.0.1');
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
    if (first) socket.write(first);
    if (trickle) timer = setInterval(() => socket.writable && socket.write(trickle), 100);
  });
  return { socket, reply: () => received, closed };
}
const headersOf = (length: number) =>
  `POST /callbacks HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

describe('the public listener bounds every connection', () => {
  let l: Listening;
  beforeAll(async () => {
    l = await listen();
  });

  it('cuts off 100 clients trickling their bodies (and 10 trickling headers) within the bound with 408 fail, while genuine callbacks are acknowledged', async () => {
    const baseline = await l.connections();
    const started = Date.now();
    const slowBodies = Array.from({ length: 100 }, () => rawClient(l.port, headersOf(4000) + '{', ' '));
    const slowHeaders = Array.from({ length: 10 }, () => rawClient(l.port, 'POST /callbacks HTTP/1.1\r\n', 'X'));
    await waitFor(async () => (await l.connections()) >= baseline + 110, {
      timeoutMs: 5000,
      message: 'slow clients never connected',
    });

    const genuine = await Promise.all(Array.from({ length: 20 }, (_, i) => send(l.port, `SLOW-OK-${i}`)));
    expect(genuine).toEqual(Array(20).fill('200 success'));

    const closedAt = await Promise.all([...slowBodies, ...slowHeaders].map((c) => c.closed));
    for (const t of closedAt) expect(t - started).toBeLessThan(CUT_OFF_WITHIN_MS);
    for (const c of [...slowBodies, ...slowHeaders]) {
      expect(c.reply()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(c.reply().endsWith('\r\n\r\nfail')).toBe(true);
    }
    // Genuine callbacks were stored; no trickled request reached the queue.
    expect(await l.ingest.queue.count()).toBe(20);
    const cut = (await l.ingest.registry.getSingleMetric('ingest_connections_cut_total')!.get()).values;
    expect(cut.find((v) => v.labels.reason === 'body_timeout')?.value).toBe(100);
    expect(cut.find((v) => v.labels.reason === 'request_timeout')?.value).toBe(10);
    // Every socket is released: the keep-alive ones of the genuine sender too, after INGEST_KEEPALIVE_TIMEOUT.
    await waitFor(async () => (await l.connections()) === baseline, {
      timeoutMs: 5000,
      message: 'open connections did not return to baseline',
    });
  });

  it('answers a malformed request line with 400 fail and closes the connection, counted as a client error', async () => {
    const bad = rawClient(l.port, 'NOT HTTP AT ALL\r\n\r\n');
    await bad.closed;
    expect(bad.reply()).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(bad.reply().endsWith('\r\n\r\nfail')).toBe(true);
    const cut = (await l.ingest.registry.getSingleMetric('ingest_connections_cut_total')!.get()).values;
    expect(cut.find((v) => v.labels.reason === 'client_error')?.value).toBe(1);
  });

  it('closes a connection that says nothing within the idle bound', async () => {
    const started = Date.now();
    const silent = rawClient(l.port, '');
    expect((await silent.closed) - started).toBeLessThan(CUT_OFF_WITHIN_MS);
    expect(silent.reply()).not.toContain('success');
  });
});

describe('INGEST_MAX_CONNECTIONS', () => {
  it('closes connections beyond the limit at once, counts them, and serves again once the holders are gone', async () => {
    const l = await listen({ INGEST_MAX_CONNECTIONS: '5' });
    const holders = Array.from({ length: 5 }, () => rawClient(l.port, headersOf(4000), ' '));
    await waitFor(async () => (await l.connections()) === 5, { timeoutMs: 5000, message: 'holders never connected' });
    const extra = rawClient(l.port, headersOf(4000));
    await extra.closed;
    expect(extra.reply()).toBe('');
    const cut = (await l.ingest.registry.getSingleMetric('ingest_connections_cut_total')!.get()).values;
    expect(cut.find((v) => v.labels.reason === 'max_connections')?.value).toBe(1);

    await Promise.all(holders.map((h) => h.closed));
    expect(await send(l.port, 'AFTER-HOLDERS')).toBe('200 success');
  });
});
