import { html, type Html } from '../web/html.ts';

/**
 * The two pages a browser sees before it signs in (login and "log in first"), on the escaping `html` views and sent
 * with the pages' headers and CSP (PAGE_HEADERS, web/send.ts).
 */

/**
 * A local path to return to after login or a form post; anything else (other hosts, `//x`, `/\x`, control
 * characters) becomes / (the console's search page). Checked after normalisation, as the browser will resolve it:
 * `/.//evil.example/x` resolves to `//evil.example/x`, another host.
 */
export function safeNext(next: unknown): string {
  if (typeof next !== 'string' || next.length > 512) return '/';
  if (!/^\/(?![/\\])[\x21-\x7e]*$/.test(next) || next.includes('\\')) return '/';
  let url: URL;
  try {
    url = new URL(next, 'http://console.invalid');
  } catch {
    return '/';
  }
  const path = `${url.pathname}${url.search}`;
  return url.origin === 'http://console.invalid' && /^\/(?![/\\])/.test(path) ? path : '/';
}

/**
 * A page outside the layout (nobody is signed in yet): the console's stylesheet, no inline style or script, so the
 * pages' CSP (PAGE_HEADERS) holds here too. Every value goes through the escaping `html` tag.
 */
function barePage(title: string, body: Html): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title} · Merchant console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/console.css"><link rel="icon" href="/assets/favicon.svg" type="image/svg+xml"></head>
<body><main id="main" class="bare">${body}</main></body></html>`.value;
}

/** The login form; `error` says why the last attempt failed. */
export function loginPage(next: string, error?: string): string {
  return barePage(
    'Log in',
    html`<h1>Merchant console</h1>
${error ? html`<p class="flash flash-error" role="alert">${error}</p>` : ''}
<form class="login" method="post" action="/login">
<label for="token">Your token (from your admin; CONSOLE_TOKEN signs in as admin)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="${next}">
<button class="primary" type="submit">Log in</button>
</form>`,
  );
}

/** What a browser that is not signed in gets for a page: a link to the login form that comes back here. */
export function loginRequiredPage(next: string): string {
  return barePage(
    'Log in first',
    html`<h1>401: log in first</h1><p><a id="login" href="/login?next=${encodeURIComponent(next)}">Log in to the console</a></p>`,
  );
}
