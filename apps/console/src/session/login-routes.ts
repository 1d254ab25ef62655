import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { countFailure } from '../auth.ts';
import type { OperatorDirectory } from '../operators/directory.ts';
import { retryAfterSeconds, type AuthFailureLimiter } from './auth-failures.ts';
import { isSameOrigin } from './same-origin.ts';
import { loginPage, safeNext } from './pages.ts';
import { SESSION_COOKIE, sessionSetCookie, type SessionCodec } from './session-cookie.ts';

/** Options of {@link loginRoutes}. */
export interface LoginRoutesOptions {
  /** Whose tokens open a session: CONSOLE_TOKEN's admin and the operators file. */
  directory: OperatorDirectory;
  sessions: SessionCodec;
  /**
   * Whether the cookie carries `Secure`: `auto` when the request came over https (fastify's `req.protocol`),
   * `always` behind a TLS-terminating proxy, `never` for plain-http development. @defaultValue 'auto'
   */
  cookieSecure?: 'auto' | 'always' | 'never';
  /** Failed-login limit shared with the bearer check; none when omitted. */
  limiter?: AuthFailureLimiter;
}

function secure(req: FastifyRequest, mode: LoginRoutesOptions['cookieSecure']): boolean {
  return mode === 'always' || (mode !== 'never' && req.protocol === 'https');
}

/**
 * `GET /login` (a form), `POST /login` (form or JSON `{token, next}`: an operator's token for a session cookie
 * that names the operator, then 303 to `next`), `POST /logout`. The auth hook lets /login through; these routes
 * check the token themselves.
 */
export const loginRoutes: FastifyPluginAsync<LoginRoutesOptions> = async (app, opts) => {
  // Form posts are parsed here only: the rest of the console stays JSON-only.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 4096 }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  const html = { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'x-frame-options': 'DENY' };

  app.get('/login', { schema: { hide: true } }, async (req, reply) => {
    const next = safeNext((req.query as Record<string, unknown>).next);
    return reply.code(200).headers(html).send(loginPage(next));
  });

  app.post('/login', { schema: { hide: true } }, async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const next = safeNext(body.next);
    if (!isSameOrigin(req)) {
      req.log.warn({ origin: req.headers.origin }, 'login refused: not same-origin');
      return reply.code(403).headers(html).send(loginPage(next, 'Refused: the form must be posted from this console.'));
    }
    const tooMany = (ms: number) =>
      reply.code(429).headers(html).header('retry-after', retryAfterSeconds(ms)).send(loginPage(next, 'Too many failed attempts: try again later.'));
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
    const session = opts.sessions.issue(operator.name);
    req.log.info({ ip: req.ip, operator: operator.name, role: operator.role, expiresAt: session.expiresAt.toISOString() }, 'operator logged in');
    return reply
      .code(303)
      .header('set-cookie', sessionSetCookie(session.value, Math.floor(opts.sessions.ttlMs / 1000), secure(req, opts.cookieSecure)))
      .header('cache-control', 'no-store')
      .header('location', next)
      .send();
  });

  app.post('/logout', { schema: { hide: true } }, async (req, reply) => {
    return reply
      .code(303)
      .header('set-cookie', `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict${secure(req, opts.cookieSecure) ? '; Secure' : ''}`)
      .header('location', '/login')
      .send();
  });
};
