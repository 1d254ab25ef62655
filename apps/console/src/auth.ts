import type { AUTH_METHODS } from '@mcb/core/db';
import { ErrorCodes } from '@mcb/core/errors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { OperatorDirectory } from './operators/directory.ts';
import type { Operator } from './operators/operator.ts';
import type { ProxyCheck } from './operators/trusted-proxies.ts';
import { retryAfterSeconds, type AuthFailureLimiter } from './session/auth-failures.ts';
import { loginRequiredPage } from './session/pages.ts';
import { PAGE_HEADERS } from './web/send.ts';
import { isSafeMethod, isSameOrigin } from './session/same-origin.ts';
import type { SessionRevocations } from './session/revocations.ts';
import { readCookie, SESSION_COOKIE, type SessionCodec } from './session/session-cookie.ts';

/** How a request was authenticated (recorded on each audit row as `via`). */
export type AuthMethod = (typeof AUTH_METHODS)[number];

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every request it lets through (except /login, /logout and /assets/). */
    authMethod?: AuthMethod;
  }
}

/** Identity from an SSO proxy in front of the console (CONSOLE_AUTH_PROXY_HEADER, CONSOLE_TRUSTED_PROXIES). */
export interface ProxyIdentity {
  /** Lower-case header name, e.g. `x-forwarded-email`. */
  header: string;
  trusted: ProxyCheck;
}

/** What {@link installAuth} checks credentials against. */
export interface AuthOptions {
  directory: OperatorDirectory;
  /** Session cookies set by POST /login; none accepted when omitted. */
  sessions?: SessionCodec;
  /** Sessions ended by logout (required with `sessions`: a logged-out session must not come back). */
  revocations?: SessionRevocations;
  limiter?: AuthFailureLimiter;
  proxy?: ProxyIdentity;
  /** CONSOLE_TRUSTED_PROXIES: whose `X-Forwarded-Proto` says the scheme the same-origin check compares. */
  trustedProxies?: ProxyCheck;
}

/**
 * Routes served without authentication: the login form and its post, logout, static assets. Decided by the route
 * fastify matched (`routeOptions.url`), not by the URL as sent: no spelling of a path reaches another route as "open".
 */
const isOpenRoute = (route: string | undefined) =>
  route === '/login' || route === '/logout' || (route !== undefined && route.startsWith('/assets/'));

/**
 * Authentication for every route of the app, including routes and plugins registered later and the 404
 * handler: an onRequest hook on the root instance runs before routing decisions leak anything. It sets
 * `req.operator` ({name, role}) from, in this order:
 * - `Authorization: Bearer <token>`: CONSOLE_TOKEN (the admin `admin`) or an operator's token from the operators
 *   file, looked up by its SHA-256;
 * - the SSO proxy's header, only when the peer address is one of CONSOLE_TRUSTED_PROXIES (from anywhere else the
 *   header is ignored); the name is looked up in the operators file only (`admin`, CONSOLE_TOKEN's holder, is not
 *   in it and cannot be named), and a name not in the file, or of a `service` entry, gets 403;
 * - the session cookie set by `POST /login`: signed by this console, not expired, not logged out, naming an operator
 *   who is still in the directory with the token the session was opened with.
 * Cookie- and proxy-authenticated requests are ambient credentials of a browser: one that changes state must come
 * from this origin (CSRF; see session/same-origin.ts), else 403. Refusals are sent from the hook itself, not
 * thrown: plugins such as bull-board install their own error handlers, which would turn a thrown 401 into a 500.
 *
 * With `limiter`, a request carrying an `Authorization` header from a locked address gets `429` whatever its
 * token, and a wrong one is counted (see session/auth-failures.ts). Session cookies are neither counted nor locked:
 * they are HMACs, proof of an earlier successful login, and an expired one is not a guess.
 */
export function installAuth(
  app: FastifyInstance,
  opts: AuthOptions,
): (req: FastifyRequest, reply: FastifyReply) => Promise<unknown> {
  const { directory, sessions, revocations, limiter, proxy } = opts;
  const admit = (req: FastifyRequest, reply: FastifyReply, operator: Operator, method: AuthMethod, path: string) => {
    if (method !== 'bearer' && !isSafeMethod(req.method) && !isSameOrigin(req, opts.trustedProxies)) {
      req.log.warn(
        { method: req.method, path, origin: req.headers.origin, site: req.headers['sec-fetch-site'] },
        'cross-origin request refused',
      );
      return refuse(
        req,
        reply,
        403,
        ErrorCodes.FORBIDDEN,
        'cross-origin request refused (browser requests that change state must come from the console itself)',
      );
    }
    req.operator = operator;
    req.authMethod = method;
    return undefined;
  };

  const check = async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const path = req.url.split('?')[0]!;
    if (sessions && isOpenRoute(req.routeOptions?.url)) return;
    const header = req.headers.authorization ?? '';
    const locked = header && limiter ? limiter.lockedFor(req.ip) : 0;
    if (locked > 0) return refuseLocked(req, reply, locked);
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
    const byToken = match !== null ? directory.byToken(match[1]!) : undefined;
    if (byToken) return admit(req, reply, byToken, 'bearer', path);

    const byProxy = !header && proxy ? proxyIdentity(req, proxy, directory) : undefined;
    if (byProxy && 'refused' in byProxy) return refuse(req, reply, 403, ErrorCodes.FORBIDDEN, byProxy.refused);
    if (byProxy) return admit(req, reply, byProxy, 'proxy', path);

    const claims = !header ? sessions?.verify(readCookie(req.headers.cookie, SESSION_COOKIE)) : undefined;
    if (claims && sessions) {
      const bySession = directory.byName(claims.name);
      const credential = directory.credentialOf(claims.name);
      // A session lasts while its operator keeps the token it was opened with, and until logout.
      if (
        bySession &&
        credential !== undefined &&
        sessions.binds(claims, credential) &&
        !(await revocations?.isRevoked(claims.id))
      ) {
        return admit(req, reply, bySession, 'session', path);
      }
    }

    reply.header('www-authenticate', 'Bearer realm="console"');
    // A browser opening a page gets a 401 page that links to the login form; everything else gets the JSON 401.
    if (
      sessions &&
      req.method === 'GET' &&
      !path.startsWith('/api/') &&
      !path.includes('/api/') &&
      /\btext\/html\b/.test(req.headers.accept ?? '')
    ) {
      return reply.code(401).headers(PAGE_HEADERS).send(loginRequiredPage(req.url));
    }
    if (header && limiter) {
      const failure = countFailure(req, limiter);
      if (failure.globalExceeded) return refuseLocked(req, reply, failure.retryAfterMs);
    }
    const message = header ? 'invalid bearer token' : 'missing bearer token (Authorization: Bearer <token>) or session';
    return refuse(req, reply, 401, ErrorCodes.UNAUTHORIZED, message);
  };
  app.addHook('onRequest', check);
  return check;
}

/**
 * The operator the SSO proxy's header names: none without the header or from an untrusted peer (the header is then
 * ignored), else the operator, or why the name is refused: not in the file, or a `service` entry (a machine
 * authenticates with its own token; a person's SSO login must not borrow its name).
 */
function proxyIdentity(
  req: FastifyRequest,
  proxy: ProxyIdentity,
  directory: OperatorDirectory,
): Operator | { refused: string } | undefined {
  const named = req.headers[proxy.header];
  if (typeof named !== 'string' || named === '') return undefined;
  if (!proxy.trusted(req.socket.remoteAddress)) {
    req.log.warn(
      { peer: req.socket.remoteAddress, header: proxy.header },
      'identity header from an untrusted address ignored',
    );
    return undefined;
  }
  const operator = directory.byFileName(named.trim());
  if (!operator) {
    req.log.warn({ operator: named.slice(0, 128) }, 'proxy identity is not an operator of this console');
    return { refused: `${named.slice(0, 128)} is not an operator of this console (CONSOLE_OPERATORS_FILE)` };
  }
  if (operator.role === 'service') {
    req.log.warn({ operator: operator.name }, 'proxy identity names a service client: refused');
    return {
      refused: `${operator.name} is a service client: it authenticates with its own token, never through the SSO proxy`,
    };
  }
  return operator;
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
      {
        ip: req.ip,
        failures: limiter.limits.perAddress,
        retryAfterSeconds: Number(retryAfterSeconds(failure.retryAfterMs)),
      },
      'authentication locked for this address: too many failures',
    );
  }
  return failure;
}

function refuseLocked(req: FastifyRequest, reply: FastifyReply, retryAfterMs: number) {
  reply.header('retry-after', retryAfterSeconds(retryAfterMs));
  return refuse(req, reply, 429, ErrorCodes.AUTH_RATE_LIMITED, 'too many failed authentication attempts; retry later');
}
