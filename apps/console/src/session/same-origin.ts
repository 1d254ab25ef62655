import type { FastifyRequest } from 'fastify';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether a method changes nothing (and so needs no CSRF check). */
export function isSafeMethod(method: string): boolean {
  return SAFE_METHODS.has(method.toUpperCase());
}

/**
 * CSRF check of a cookie-authenticated request that changes state: the browser must say it comes from this
 * origin. `Origin` (sent by every current browser on fetch/XHR and form posts) must name this host; without it,
 * `Sec-Fetch-Site` must be `same-origin`; with neither the request is refused. Together with the session
 * cookie's SameSite=Strict, JSON-only bodies and no CORS, a page on another site cannot act for an operator.
 */
export function isSameOrigin(req: FastifyRequest): boolean {
  const host = req.headers.host;
  const origin = req.headers.origin;
  if (typeof origin === 'string' && origin !== '') {
    if (origin === 'null' || !host) return false;
    try {
      return new URL(origin).host === host.toLowerCase();
    } catch {
      return false;
    }
  }
  return req.headers['sec-fetch-site'] === 'same-origin';
}
