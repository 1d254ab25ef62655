import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { countFailure } from '../auth.ts';
import type { OperatorDirectory } from '../operators/directory.ts';
import type { ProxyCheck } from '../operators/trusted-proxies.ts';
import { retryAfterSeconds, type AuthFailureLimiter } from './auth-failures.ts';
import { PAGE_HEADERS } from '../web/send.ts';
import { cameOverHttps, isSameOrigin } from './same-origin.ts';
import { loginPage, safeNext } from './pages.ts';
import type { SessionRevocations } from './revocations.ts';
import { readCookie, SESSION_COOKIE, sessionSetCookie, type SessionCodec } from './session-cookie.ts';

/** Options of {@link loginRoutes}. */
export interface LoginRoutesOptions {
  /** Whose tokens open a session: CONSOLE_TOKEN's admin and the operators file. */
  directory: OperatorDirectory;
  sessions: SessionCodec;
  /** Where logout records the sessions it ends. */
  revocations: SessionRevocations;
  /**
   * Whether the cookie carries `Secure`: `auto` when the request came over https (TLS to the console itself, or
   * `X-Forwarded-Proto: https` from one of `trustedProxies`), `always`, `never` for plain-http development.
   * @defaultValue 'auto'
   */
  cookieSecure?: 'auto' | 'always' | 'never';
  /** CONSOLE_TRUSTED_PROXIES: the only peers whose `X-Forwarded-Proto` is believed. @defaultValue none */
  trustedProxies?: ProxyCheck;
  /** Failed-login limit shared with the bearer check; none when omitted. */
  limiter?: AuthFailureLimiter;
}

function secure(req: FastifyRequest, opts: LoginRoutesOptions): boolean {
  const mode = opts.cookieSecure ?? 'auto';
  return mode === 'always' || (mode === 'auto' && cameOverHttps(req, opts.trustedProxies));
}

/**
 * `GET /login` (a form), `POST /login` (form or JSON `{token, next}`: an operator's token for a session cookie
 * that names the operator, then 303 to `next`), `POST /logout`. The auth hook lets /login through; these routes
 * check the token themselves.
 */
export const loginRoutes: FastifyPluginAsync<LoginRoutesOptions> = async (app, opts) => {
  // Form posts are parsed here only: the rest of the console stays JSON-only.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 4096 },
    (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    },
  );

  // The pages' headers and CSP (no script, styles from /assets only), as every page of the console.
  const html = PAGE_HEADERS;

  app.get('/login', { schema: { hide: true } }, async (req, reply) => {
    const next = safeNext((req.query as Record<string, unknown>).next);
    return reply.code(200).headers(html).send(loginPage(next));
  });

  app.post('/login', { schema: { hide: true } }, async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const next = safeNext(body.next);
    if (!isSameOrigin(req, opts.trustedProxies)) {
      req.log.warn({ origin: req.headers.origin }, 'login refused: not same-origin');
      return reply.code(403).headers(html).send(loginPage(next, 'Refused: the form must be posted from this console.'));
    }
    const tooMany = (ms: number) =>
      reply
        .code(429)
        .headers(html)
        .header('retry-after', retryAfterSeconds(ms))
        .send(loginPage(next, 'Too many failed attempts: try again later.'));
    const locked = opts.limiter?.lockedFor(req.ip) ?? 0;
    if (locked > 0) return tooMany(locked);
    const given = typeof body.token === 'string' ? body.token : '';
    const operator = given ? opts.directory.byToken(given) : undefined;
    if (!operator) {
      req.log.warn({ ip: req.ip }, 'login failed: wrong token');
      const failure = opts.limiter ? countFailure(req, opts.limiter) : undefined;
      if (failure?.globalExceeded) return tooMany(failure.retryAfterMs);
      return reply.code(401).headers(html).send(loginPage(next, 'Wrong token.'));
    }
    if (operator.role === 'service') {
      // A machine client has no use for the pages, and a session would be a second credential for it to lose.
      req.log.warn({ ip: req.ip, operator: operator.name }, 'login refused: a service client');
      return reply
        .code(403)
        .headers(html)
        .send(loginPage(next, 'This token belongs to a service client: it works with the API only, not the pages.'));
    }
    const session = opts.sessions.issue(operator.name, opts.directory.credentialOf(operator.name)!);
    req.log.info(
      { ip: req.ip, operator: operator.name, role: operator.role, expiresAt: session.expiresAt.toISOString() },
      'operator logged in',
    );
    return reply
      .code(303)
      .header('set-cookie', sessionSetCookie(session.value, Math.floor(opts.sessions.ttlMs / 1000), secure(req, opts)))
      .header('cache-control', 'no-store')
      .header('location', next)
      .send();
  });

  // Logout ends the session for good (recorded until it would have expired), not only in this browser. It must come
  // from this origin: another site may not log an operator out.
  app.post('/logout', { schema: { hide: true } }, async (req, reply) => {
    if (!isSameOrigin(req, opts.trustedProxies)) {
      req.log.warn({ origin: req.headers.origin }, 'logout refused: not same-origin');
      return reply.code(403).headers(html).send(loginPage('/', 'Refused: log out from the console itself.'));
    }
    const claims = opts.sessions.verify(readCookie(req.headers.cookie, SESSION_COOKIE));
    if (claims) {
      await opts.revocations.revoke(claims.id, new Date(claims.expiresAt));
      req.log.info({ operator: claims.name }, 'operator logged out');
    }
    return reply
      .code(303)
      .header(
        'set-cookie',
        `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict${secure(req, opts) ? '; Secure' : ''}`,
      )
      .header('location', '/login')
      .send();
  });
};
