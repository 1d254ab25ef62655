/** The console's two HTML pages (login and "log in first"); everything else it serves is JSON or bull-board. */

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

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

const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem;color:#222}' +
  'label,input,button{display:block;width:100%;box-sizing:border-box;font-size:1rem}' +
  'input{margin:.4rem 0 1rem;padding:.5rem}button{padding:.6rem;cursor:pointer}.error{color:#b00020}';

export function loginPage(next: string, error?: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Console login</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><h1>Merchant console</h1>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/login">
<label for="token">Your token (from your admin; CONSOLE_TOKEN signs in as admin)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="${escapeHtml(next)}">
<button type="submit">Log in</button>
</form></body></html>`;
}

export function loginRequiredPage(next: string): string {
  const href = `/login?next=${encodeURIComponent(next)}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Log in first</title><style>${STYLE}</style></head>
<body><h1>401: log in first</h1><p><a id="login" href="${escapeHtml(href)}">Log in to the console</a></p></body></html>`;
}
