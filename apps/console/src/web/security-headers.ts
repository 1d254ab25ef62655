import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { ErrorCodes } from '@mcb/core/errors';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** What every response may not be: framed by another page (clickjacking), or sniffed into another content type. */
const FRAME_ANCESTORS = "frame-ancestors 'none'";
/** The two headers whose value never varies (the CSP is merged into a page's own: {@link withFrameAncestors}). */
const FIXED_HEADERS = { 'x-content-type-options': 'nosniff', 'x-frame-options': 'DENY' } as const;

/** A Content-Security-Policy with `frame-ancestors 'none'`: added to the policy a response already has, else alone. */
export function withFrameAncestors(csp: unknown): string {
  const current = typeof csp === 'string' ? csp.trim() : Array.isArray(csp) ? csp.join('; ') : '';
  if (current === '') return FRAME_ANCESTORS;
  if (/(^|;)\s*frame-ancestors\s+'none'\s*(;|$)/i.test(current)) return current;
  // Any other frame-ancestors directive is replaced: none of our pages is meant to be framed.
  const rest = current
    .split(';')
    .map((d) => d.trim())
    .filter((d) => d !== '' && !/^frame-ancestors\b/i.test(d));
  return [...rest, FRAME_ANCESTORS].join('; ');
}

/**
 * One onSend hook on the root instance, so it covers every response: the console's pages, bull-board (its page,
 * scripts and API), the 401 and login pages, the error pages, and refusals sent from hooks. `frame-ancestors 'none'`
 * (merged into a page's own CSP) and `X-Frame-Options: DENY` keep any other page from framing a logged-in console;
 * `nosniff` keeps a browser from running a response as another type than it says. Nothing else of a page's policy
 * is changed (bull-board's scripts keep working).
 */
export function installSecurityHeaders(app: FastifyInstance): void {
  app.addHook('onSend', async (_req, reply, payload) => {
    setSecurityHeaders(reply);
    return payload;
  });
}

/**
 * The three headers on one reply. The hook above sets them on everything routed; a reply sent where no hook runs
 * (fastify's `frameworkErrors`: a malformed URL, a path parameter over its limit, and the 401 sent there) calls this
 * itself before sending.
 */
export function setSecurityHeaders(reply: FastifyReply): void {
  reply.headers(FIXED_HEADERS);
  reply.header('content-security-policy', withFrameAncestors(reply.getHeader('content-security-policy')));
}

/**
 * Node's HTTP parser refuses some requests before fastify sees them (headers over 16 KiB: 431; a request it cannot
 * parse: 400; one too slow to arrive: 408), and fastify's default answer to those carries none of the headers above.
 * This is fastify's `clientErrorHandler` for the console: the same statuses, with the three headers, our error body,
 * and the connection closed.
 */
export function clientErrorReply(err: NodeJS.ErrnoException, socket: Duplex): void {
  // A reset connection has no one left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'request headers too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request not received in time']
        : [400, 'malformed request'];
  const body = JSON.stringify({ code: ErrorCodes.REQUEST_INVALID, message });
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        Object.entries({ ...FIXED_HEADERS, 'content-security-policy': FRAME_ANCESTORS })
          .map(([name, value]) => `${name}: ${value}\r\n`)
          .join('') +
        'Connection: close\r\n\r\n' +
        body,
    );
  socket.destroy(err);
}
