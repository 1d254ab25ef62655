import type { FastifyRequest } from 'fastify';
import type { ProxyCheck } from '../operators/trusted-proxies.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether a method changes nothing (and so needs no CSRF check). */
export function isSafeMethod(method: string): boolean {
  return SAFE_METHODS.has(method.toUpperCase());
}

/** Whether the browser reached us over https: TLS to this process, or a trusted TLS-terminating proxy that says so. */
export function cameOverHttps(req: FastifyRequest, trusted: ProxyCheck | undefined): boolean {
  if (req.protocol === 'https') return true;
  if (!trusted?.(req.socket.remoteAddress)) return false;
  const proto = req.headers['x-forwarded-proto'];
  // The proxy nearest to us appends last; with one TLS proxy the value is a single `https`.
  const last = (typeof proto === 'string' ? proto : '').split(',').pop()?.trim().toLowerCase();
  return last === 'https';
}

/**
 * CSRF check of a cookie-authenticated request that changes state: the browser must say it comes from this
 * origin. `Origin` (sent by every current browser on fetch/XHR and form posts) must name this host and the scheme
 * the browser reached us by (https directly or through a trusted TLS proxy, else http: a page served over plain http
 * on the same host is another origin, one a network attacker can write); without it,
 * `Sec-Fetch-Site` must be `same-origin`; with neither the request is refused. Together with the session
 * cookie's SameSite=Strict, JSON-only bodies and no CORS, a page on another site cannot act for an operator.
 */
export function isSameOrigin(req: FastifyRequest, trusted?: ProxyCheck): boolean {
  const host = req.headers.host;
  const origin = req.headers.origin;
  if (typeof origin === 'string' && origin !== '') {
    if (origin === 'null' || !host) return false;
    try {
      const url = new URL(origin);
      return url.host === host.toLowerCase() && url.protocol === (cameOverHttps(req, trusted) ? 'https:' : 'http:');
    } catch {
      return false;
    }
  }
  return req.headers['sec-fetch-site'] === 'same-origin';
}
