import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../src/errors.ts';
import { createPlatformClient, PlatformCodeError, type PlatformClient } from '../src/platform/index.ts';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
let handler: Handler = () => {};
let server: Server;
let baseUrl: string;
const received: { headers: IncomingMessage['headers']; body: string; url: string | undefined }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body, url: req.url });
      handler(req, body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const ok = (data: string) => `{"code":0,"message":"success","data":${data}}`;
const ORDER =
  '{"orderNo":"P1","merchantNo":"M1","merchantOrderNo":"MO1","type":"payin","state":6,"amount":100.10,"currency":"PHP"}';
const reply =
  (status: number, text: string): Handler =>
  (_req, _body, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(text);
  };

async function withClient<T>(
  fn: (c: PlatformClient) => Promise<T>,
  opts: { timeoutMs?: number; baseUrl?: string } = {},
): Promise<T> {
  const client = createPlatformClient({
    baseUrl: opts.baseUrl ?? baseUrl,
    merchantNo: 'M1',
    timeoutMs: opts.timeoutMs ?? 2000,
  });
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

async function failure(
  fn: (c: PlatformClient) => Promise<unknown>,
  opts?: { timeoutMs?: number; baseUrl?: string },
): Promise<AppError> {
  const e = await withClient(fn, opts).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(AppError);
  return e as AppError;
}

describe('Get order', () => {
  it('posts {merchantNo, merchantOrderNo} as JSON and returns the order with its amount as exact text', async () => {
    handler = reply(200, ok(ORDER));
    const order = await withClient((c) => c.getOrder('MO1'));
    expect(order).toEqual({
      orderNo: 'P1',
      merchantNo: 'M1',
      merchantOrderNo: 'MO1',
      type: 'payin',
      state: 6,
      amount: '100.1',
      currency: 'PHP',
    });
    const last = received.at(-1)!;
    expect(last.url).toBe('/api/open/order/getOrder');
    expect(last.headers['content-type']).toBe('application/json');
    expect(JSON.parse(last.body)).toEqual({ merchantNo: 'M1', merchantOrderNo: 'MO1' });
  });

  it('never passes an amount through a float', async () => {
    handler = reply(200, ok(ORDER.replace('100.10', '12345678901234567.89')));
    expect((await withClient((c) => c.getOrder('MO1'))).amount).toBe('12345678901234567.89');
    handler = reply(200, ok(ORDER.replace('100.10', '"0.30000000000000000001"')));
    expect((await withClient((c) => c.getOrder('MO1'))).amount).toBe('0.30000000000000000001');
  });

  it('runs the authentication hook on every request, which may add headers', async () => {
    handler = reply(200, ok(ORDER));
    const client = createPlatformClient({
      baseUrl,
      merchantNo: 'M1',
      authenticate: (req) => {
        req.headers['x-signature'] = `sig:${req.body.length}`;
      },
    });
    try {
      await client.getOrder('MO1');
    } finally {
      await client.close();
    }
    expect(received.at(-1)!.headers['x-signature']).toMatch(/^sig:\d+$/);
  });

  it('classifies a timeout as transient PLATFORM_TIMEOUT', async () => {
    handler = () => {}; // never answers
    const e = await failure((c) => c.getOrder('MO1'), { timeoutMs: 200 });
    expect(e.code).toBe('PLATFORM_TIMEOUT');
    expect(e.transient).toBe(true);
  });

  it('classifies HTTP 5xx as transient PLATFORM_HTTP_ERROR', async () => {
    handler = reply(503, 'down');
    const e = await failure((c) => c.getOrder('MO1'));
    expect(e).toMatchObject({ code: 'PLATFORM_HTTP_ERROR', transient: true, details: { status: 503 } });
  });

  it('classifies HTTP 4xx as permanent PLATFORM_HTTP_ERROR', async () => {
    handler = reply(403, 'forbidden');
    const e = await failure((c) => c.getOrder('MO1'));
    expect(e).toMatchObject({ code: 'PLATFORM_HTTP_ERROR', transient: false, details: { status: 403 } });
  });

  it('bounds a chunked reply that declares no length: over the limit is PLATFORM_BAD_RESPONSE, not unbounded memory', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }); // no content-length: chunked
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const pump = () => {
        while (sent < 6 * 1024 * 1024) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end('{}');
      };
      pump();
    };
    const err = await withClient((c) => c.getOrder('MO1')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'PLATFORM_BAD_RESPONSE', message: expect.stringMatching(/over the limit/) });
  });

  it('classifies a reply that is not JSON as transient PLATFORM_BAD_RESPONSE (a passing fault, like a 5xx)', async () => {
    handler = reply(200, '<html>gateway</html>');
    const e = await failure((c) => c.getOrder('MO1'));
    expect(e).toMatchObject({ code: 'PLATFORM_BAD_RESPONSE', transient: true });
  });

  it('names the content type of an HTML maintenance page (HTTP 200) and treats it as transient', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><h1>Maintenance</h1>');
    };
    const e = await failure((c) => c.getOrder('MO1'));
    expect(e).toMatchObject({
      code: 'PLATFORM_BAD_RESPONSE',
      transient: true,
      details: expect.objectContaining({ status: 200, contentType: 'text/html; charset=utf-8' }),
    });
    expect(e.message).toMatch(/not JSON.*text\/html/);
  });

  it('classifies JSON that is not the envelope {code, message, data} as transient PLATFORM_BAD_RESPONSE', async () => {
    handler = reply(200, '{"status":"maintenance"}');
    expect(await failure((c) => c.getOrder('MO1'))).toMatchObject({ code: 'PLATFORM_BAD_RESPONSE', transient: true });
  });

  it('classifies an order without an amount, or with a non-decimal one, as PLATFORM_BAD_RESPONSE', async () => {
    handler = reply(200, ok(ORDER.replace(',"amount":100.10', '')));
    expect((await failure((c) => c.getOrder('MO1'))).code).toBe('PLATFORM_BAD_RESPONSE');
    handler = reply(200, ok(ORDER.replace('100.10', '"ten"')));
    expect((await failure((c) => c.getOrder('MO1'))).code).toBe('PLATFORM_BAD_RESPONSE');
  });

  it('turns an envelope code other than 0 into PlatformCodeError with the platform code and message', async () => {
    handler = reply(200, '{"code":40404,"message":"order not found","data":null}');
    const e = await failure((c) => c.getOrder('MO1'));
    expect(e).toBeInstanceOf(PlatformCodeError);
    expect(e).toMatchObject({
      code: 'PLATFORM_ERROR_CODE',
      platformCode: 40404,
      platformMessage: 'order not found',
      transient: false,
    });
  });

  it('honours an AbortSignal as PLATFORM_ABORTED', async () => {
    handler = () => {};
    const controller = new AbortController();
    const pending = failure((c) => c.getOrder('MO1', { signal: controller.signal }));
    setTimeout(() => controller.abort(), 50);
    const e = await pending;
    expect(e.code).toBe('PLATFORM_ABORTED');
  });

  it('classifies a refused connection as transient PLATFORM_UNREACHABLE', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const e = await failure((c) => c.getOrder('MO1'), { baseUrl: `http://127.0.0.1:${port}` });
    expect(e).toMatchObject({ code: 'PLATFORM_UNREACHABLE', transient: true });
  });
});
