/**
 * The console: its listeners, who may sign in (a token, an operators file, an SSO proxy), sessions, failed-login
 * limits and replay rates (docs/console.md).
 */
import { z } from 'zod';
import { bound, duration, optionalString, optionalUrl, port, sourceRanges, type ValuesOf } from './fields.ts';
import type { AppRole } from './role.ts';

/** The console area of the config schema (composed in index.ts). */
export const consoleFields = {
  /** Address of the console's API and dashboard (internal: loopback by default). */
  CONSOLE_HOST: z.string().default('127.0.0.1'),
  /** Port of the console's API and dashboard. */
  CONSOLE_PORT: port(8081),
  /** Port of the console's ops listener (Prometheus /metrics). */
  CONSOLE_METRICS_PORT: port(9466),
  /** Address of the console's ops listener (metrics, health); never inherits CONSOLE_HOST. */
  CONSOLE_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /**
   * Bearer token of the single admin (named `admin`), for small setups. Required unless CONSOLE_OPERATORS_FILE is
   * set.
   */
  CONSOLE_TOKEN: optionalString.pipe(z.string().min(16, 'expected at least 16 characters').optional()),
  /**
   * JSON file listing the console's operators:
   * `[{"name", "role": "viewer"|"operator"|"admin"|"service", "tokenSha256"}]` (the SHA-256 of each operator's
   * bearer token, hex; `service`: a machine client such as the shop, which registers orders and reads the API only).
   * Read once at start. @defaultValue unset (CONSOLE_TOKEN only)
   */
  CONSOLE_OPERATORS_FILE: optionalString,
  /**
   * Request header naming the operator, set by an SSO proxy in front of the console (e.g. `X-Forwarded-Email` from
   * oauth2-proxy). Honoured only from CONSOLE_TRUSTED_PROXIES; the role comes from CONSOLE_OPERATORS_FILE by name.
   * @defaultValue unset (no proxy identity)
   */
  CONSOLE_AUTH_PROXY_HEADER: optionalString.pipe(
    z
      .string()
      .regex(/^[A-Za-z0-9-]{1,64}$/, 'expected an HTTP header name')
      .optional(),
  ),
  /**
   * Addresses (IPs or CIDR blocks, comma-separated) whose CONSOLE_AUTH_PROXY_HEADER and `X-Forwarded-Proto` are
   * believed. @defaultValue unset
   */
  CONSOLE_TRUSTED_PROXIES: sourceRanges,
  /**
   * Where `pnpm cli` reaches the console's API.
   * @defaultValue http://CONSOLE_HOST:CONSOLE_PORT (127.0.0.1 for 0.0.0.0)
   */
  CONSOLE_URL: optionalUrl(['http:', 'https:'], 'http(s)'),
  /**
   * The bearer token `pnpm cli` sends: your own operator token from CONSOLE_OPERATORS_FILE, so the audit trail names
   * you. @defaultValue CONSOLE_TOKEN (the admin `admin`)
   */
  CONSOLE_OPERATOR_TOKEN: optionalString,
  /**
   * Key of the dashboard's session cookies (32+ characters): whoever holds it can mint a session for any operator,
   * so it is never derived from CONSOLE_TOKEN. Required with CONSOLE_OPERATORS_FILE. @defaultValue a random key per
   * process (CONSOLE_TOKEN only: sessions end when the console restarts, and are not shared by instances)
   */
  CONSOLE_SESSION_SECRET: optionalString.pipe(z.string().min(32, 'expected at least 32 characters').optional()),
  /** Lifetime of a dashboard login session (fixed, not sliding). */
  CONSOLE_SESSION_TTL: duration('4h'),
  /**
   * `Secure` on the session cookie: auto (when the request came over https: TLS to the console, or
   * `X-Forwarded-Proto: https` from a CONSOLE_TRUSTED_PROXIES address), always, never.
   */
  CONSOLE_COOKIE_SECURE: z.enum(['auto', 'always', 'never']).default('auto'),
  /**
   * Failed logins / bearer tokens from one client address within CONSOLE_AUTH_FAILURE_WINDOW that lock it until the
   * window ends (429 with Retry-After, even for the right token); beyond CONSOLE_AUTH_MAX_FAILURES_GLOBAL failures
   * from all addresses together, failures answer 429 instead of 401.
   */
  CONSOLE_AUTH_MAX_FAILURES: z.coerce.number().int().min(1).default(10),
  /** Failed authentications from all addresses per window beyond which failures answer 429. */
  CONSOLE_AUTH_MAX_FAILURES_GLOBAL: z.coerce.number().int().min(1).default(100),
  /** The window of both failed-authentication limits. */
  CONSOLE_AUTH_FAILURE_WINDOW: bound('1m', 24 * 3600_000),
  /**
   * Bound of the console's stop after SIGTERM: requests in flight finish, then the pools close; whatever is still
   * open then is forced closed and the process exits 1. Keep it below the orchestrator's grace period.
   * @defaultValue 25s
   */
  CONSOLE_SHUTDOWN_TIMEOUT: bound('25s', 600_000),
  /**
   * Failed jobs a replay sends back to the queue per second when the operator names no rate (each costs one Get
   * order). Gentle, so a replay started at rush hour does not crowd out live callbacks. @defaultValue 10
   */
  CONSOLE_REPLAY_RATE: z.coerce.number().int().min(1).max(10_000).default(10),
  /**
   * The highest `ratePerSecond` a replay may ask for (and the dry run's Get order rate): what the platform's Get
   * order tolerates beside live traffic (its Get orders come out of PLATFORM_MAX_RPS, the fleet's budget). A higher
   * ask is refused with 400. @defaultValue 100
   */
  CONSOLE_REPLAY_MAX_RATE: z.coerce.number().int().min(1).max(10_000).default(100),
};

/**
 * A proxy identity needs the addresses it may come from and the file that gives it a role; operators' sessions need
 * a key of their own (a random one per process would log every operator out at each restart, and differ between
 * instances).
 */
export function consoleAuthProblems(values: ValuesOf<typeof consoleFields>, role: AppRole): string[] {
  const problems: string[] = [];
  if (
    role === 'console' &&
    values.CONSOLE_OPERATORS_FILE !== undefined &&
    values.CONSOLE_SESSION_SECRET === undefined
  ) {
    problems.push(
      'CONSOLE_SESSION_SECRET: required with CONSOLE_OPERATORS_FILE ' +
        "(the key of the operators' sessions, 32+ random characters; never CONSOLE_TOKEN) (unset)",
    );
  }
  if (values.CONSOLE_AUTH_PROXY_HEADER !== undefined) {
    if (values.CONSOLE_TRUSTED_PROXIES === undefined)
      problems.push('CONSOLE_TRUSTED_PROXIES: required with CONSOLE_AUTH_PROXY_HEADER (the proxy addresses) (unset)');
    if (values.CONSOLE_OPERATORS_FILE === undefined)
      problems.push(
        'CONSOLE_OPERATORS_FILE: required with CONSOLE_AUTH_PROXY_HEADER (roles come from it by name) (unset)',
      );
  }
  return problems;
}

/**
 * The console's settings that are allowed but unsafe in production. PLATFORM_MAX_RPS (worker.ts) is the fleet's Get
 * order budget a replay draws on.
 */
export function consoleWarnings(
  config: ValuesOf<typeof consoleFields> & { readonly role: AppRole; readonly PLATFORM_MAX_RPS: number },
): string[] {
  const warnings: string[] = [];
  if (config.role === 'console' && !config.CONSOLE_SESSION_SECRET) {
    warnings.push(
      'CONSOLE_SESSION_SECRET unset: a random session key per start, so dashboard sessions end when the console ' +
        'restarts and are not shared by several consoles',
    );
  }
  if (
    config.role === 'console' &&
    config.PLATFORM_MAX_RPS > 0 &&
    config.CONSOLE_REPLAY_MAX_RATE > config.PLATFORM_MAX_RPS
  ) {
    warnings.push(
      `CONSOLE_REPLAY_MAX_RATE (${config.CONSOLE_REPLAY_MAX_RATE}) is above PLATFORM_MAX_RPS ` +
        `(${config.PLATFORM_MAX_RPS}): a replay's Get orders come out of the fleet's budget, so it cannot go faster`,
    );
  }
  return warnings;
}
