import { createHash, timingSafeEqual } from 'node:crypto';
import { ErrorCodes } from '@mcb/core/errors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { retryAfterSeconds, type AuthFailureLimiter } from './session/auth-failures.ts';
import { loginRequiredPage } from './session/pages.ts';
import { isSafeMethod, isSameOrigin } from './session/same-origin.ts';
import { readCookie, SESSION_COOKIE, type SessionCodec } from './session/session-cookie.ts';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** How a request was authenticated. */
export type AuthMethod = 'bearer' | 'session';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every request it lets through (except /login and /logout). */
    authMethod?: AuthMethod;
  }
}

/** Paths served without authentication: the login form and its post, and logout (it only clears the cookie). */
const OPEN_PATHS = new Set(['/login', '/logout']);

/**
 * Authentication for every route of the app, including routes and plugins registered later and the 404
 * handler: an onRequest hook on the root instance runs before routing decisions leak anything. Accepted:
 * `Authorization: Bearer <CONSOLE_TOKEN>` (compared on SHA-256 digests, so neither content nor length shows in
 * the timing), or, when `sessions` is given, the session cookie set by `POST /login`. A cookie-authenticated
 * request that changes state must also come from this origin (CSRF; see session/same-origin.ts), else 403.
 * Refusals are sent from the hook itself, not thrown: plugins such as bull-board install their own error
 * handlers, which would turn a thrown 401 into a 500.
 *
 * With `limiter`, a request carrying an `Authorization` header from a locked address gets `429` whatever its
 * token, and a wrong one is counted (see session/auth-failures.ts). Session cookies are neither counted nor locked:
 * they are HMACs of the token, proof of an earlier successful login, and an expired one is not a guess.
 */
export function installBearerAuth(
  app: FastifyInstance,
  token: string,
  sessions?: SessionCodec,
  limiter?: AuthFailureLimiter,
): (req: FastifyRequest, reply: FastifyReply) => Promise<unknown> {
  const expected = digest(token);
  const check = async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const path = req.url.split('?')[0]!;
    if (sessions && OPEN_PATHS.has(path)) return;
    const header = req.headers.authorization ?? '';
    const locked = header && limiter ? limiter.lockedFor(req.ip) : 0;
    if (locked > 0) return refuseLocked(req, reply, locked);
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
    if (match !== null && timingSafeEqual(digest(match[1]!), expected)) {
      req.authMethod = 'bearer';
      return;
    }
    if (!header && sessions?.verify(readCookie(req.headers.cookie, SESSION_COOKIE))) {
      if (!isSafeMethod(req.method) && !isSameOrigin(req)) {
        req.log.warn({ method: req.method, path, origin: req.headers.origin, site: req.headers['sec-fetch-site'] }, 'cross-origin request refused');
        return refuse(req, reply, 403, ErrorCodes.FORBIDDEN, 'cross-origin request refused (session requests that change state must come from the console itself)');
      }
      req.authMethod = 'session';
      return;
    }
    reply.header('www-authenticate', 'Bearer realm="console"');
    // A browser opening a page gets a 401 page that links to the login form; everything else gets the JSON 401.
    if (sessions && req.method === 'GET' && !path.startsWith('/api/') && !path.includes('/api/') && /\btext\/html\b/.test(req.headers.accept ?? '')) {
      return reply.code(401).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(loginRequiredPage(req.url));
    }
    if (header && limiter) {
      const failure = countFailure(req, limiter);
      if (failure.globalExceeded) return refuseLocked(req, reply, failure.retryAfterMs);
    }
    const message = header ? 'invalid bearer token' : 'missing bearer token (Authorization: Bearer <CONSOLE_TOKEN>) or session';
    return refuse(req, reply, 401, ErrorCodes.UNAUTHORIZED, message);
  };
  app.addHook('onRequest', check);
  return check;
}

function refuse(req: FastifyRequest, reply: FastifyReply, status: number, code: string, message: string) {
  req.log.info({ code, status }, 'request refused');
  return reply.code(status).send({ code, message, requestId: req.id });
}

/** Count a failed authentication from `req.ip`; log the lock-out once, when it begins (never the attempted token). */
export function countFailure(req: FastifyRequest, limiter: AuthFailureLimiter): ReturnType<AuthFailureLimiter['fail']> {
  const failure = limiter.fail(req.ip);
  if (failure.lockedNow) {
    req.log.warn(
      { ip: req.ip, failures: limiter.limits.perAddress, retryAfterSeconds: Number(retryAfterSeconds(failure.retryAfterMs)) },
      'authentication locked for this address: too many failures',
    );
  }
  return failure;
}

function refuseLocked(req: FastifyRequest, reply: FastifyReply, retryAfterMs: number) {
  reply.header('retry-after', retryAfterSeconds(retryAfterMs));
  return refuse(req, reply, 429, ErrorCodes.AUTH_RATE_LIMITED, 'too many failed authentication attempts; retry later');
}
