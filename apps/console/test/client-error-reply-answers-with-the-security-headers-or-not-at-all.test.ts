import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientErrorReply } from '../src/web/security-headers.ts';

// The console's clientErrorHandler, on a real socket pair: what it writes for each error Node's parser raises, and
// that it writes nothing to a connection the client already reset. (The 431 and 400 through the whole console:
// test/console/every-response-forbids-framing-and-sniffing.test.ts.)
let server: Server;

beforeAll(async () => {
  server = createServer((socket: Socket) => socket.on('error', () => undefined));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** Connect, let the server side answer an error of `code`, and return what arrived before the connection closed. */
async function replyTo(code: string): Promise<string> {
  const { port } = server.address() as AddressInfo;
  const accepted = new Promise<Socket>((r) => server.once('connection', r));
  let out = '';
  const client = connect(port, '127.0.0.1');
  client.on('error', () => undefined);
  client.on('data', (d: Buffer) => (out += d.toString()));
  const closed = new Promise<void>((r) => client.on('close', () => r()));
  const socket = await accepted;
  clientErrorReply(Object.assign(new Error(code), { code }), socket);
  if (!socket.destroyed) socket.end(); // what the reply left open (a reset connection), closed by the test
  await closed;
  return out;
}

describe("the console's reply to a request Node's parser refused", () => {
  it.each([
    ['ERR_HTTP_REQUEST_TIMEOUT', '408 Request Timeout', 'request not received in time'],
    ['HPE_HEADER_OVERFLOW', '431 Request Header Fields Too Large', 'request headers too large'],
    ['HPE_INVALID_METHOD', '400 Bad Request', 'malformed request'],
  ])('%s: %s with the security headers, our error body, and the connection closed', async (code, status, message) => {
    const reply = await replyTo(code);
    const [head = '', body = ''] = reply.split('\r\n\r\n');
    const [statusLine, ...lines] = head.split('\r\n');
    expect(statusLine).toBe(`HTTP/1.1 ${status}`);
    expect(lines).toEqual(
      expect.arrayContaining([
        'x-content-type-options: nosniff',
        'x-frame-options: DENY',
        "content-security-policy: frame-ancestors 'none'",
        'Connection: close',
        `Content-Length: ${Buffer.byteLength(body)}`,
      ]),
    );
    expect(JSON.parse(body)).toEqual({ code: 'REQUEST_INVALID', message });
  });

  it('writes nothing to a connection the client reset', async () => {
    expect(await replyTo('ECONNRESET')).toBe('');
  });
});
