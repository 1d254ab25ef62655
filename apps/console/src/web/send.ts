import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Html } from './html.ts';
import { layout, type PageFrame } from './layout.ts';

/**
 * Our pages run only our own script files (no inline script) and load nothing from elsewhere; they may not be framed.
 */
export const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};

/** Send a page in the layout (or only its body to an `HX-Request`, should a page ever be fetched in part). */
export function sendPage(
  req: FastifyRequest,
  reply: FastifyReply,
  frame: Omit<PageFrame, 'operator'>,
  body: Html,
  status = 200,
) {
  const page = req.headers['hx-request'] === 'true' ? body : layout({ ...frame, operator: req.operator }, body);
  return reply.code(status).headers(PAGE_HEADERS).send(page.value);
}

/** After a form post: back to `to` (a local path) with a one-line flash in the query, which the page shows. */
export function redirectWithFlash(reply: FastifyReply, to: string, flash: { kind: 'ok' | 'error'; text: string }) {
  const url = new URL(to, 'http://console.invalid');
  url.searchParams.delete('ok');
  url.searchParams.delete('error');
  url.searchParams.set(flash.kind, flash.text.slice(0, 300));
  // Normalised here: a path that resolves to `//host` would send the browser to another site.
  const path = url.origin === 'http://console.invalid' && /^\/(?![/\\])/.test(url.pathname) ? url.pathname : '/';
  return reply.code(303).header('location', `${path}${url.search}`).header('cache-control', 'no-store').send();
}

/** The flash a page received through {@link redirectWithFlash}, if any. */
export function flashOf(query: unknown): PageFrame['flash'] {
  const q = (query ?? {}) as Record<string, unknown>;
  if (typeof q.error === 'string' && q.error) return { kind: 'error', text: q.error.slice(0, 300) };
  if (typeof q.ok === 'string' && q.ok) return { kind: 'ok', text: q.ok.slice(0, 300) };
  return undefined;
}
