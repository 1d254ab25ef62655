import { z } from 'zod';
import { AppError, ErrorCodes } from '../errors.ts';
import { parseRedisNodes } from '../redis-target.ts';
import { parseDuration } from './duration.ts';
import { parseSourceRanges, type SourceRange } from './source-ranges.ts';

export { parseDuration } from './duration.ts';
export { addressMatcher, ipv6Groups, parseSourceRanges, type SourceRange } from './source-ranges.ts';

/** Which process is loading the config: decides which variables are required. */
export type AppRole = 'ingest' | 'worker' | 'console' | 'sandbox' | 'cli';

const port = (fallback: number) => z.coerce.number().int().min(0).max(65_535).default(fallback);
const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'expected true or false' })
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      const ms = parseDuration(v);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: 'expected a duration such as 500ms, 30s, 5m, 2h or 7d' });
        return z.NEVER;
      }
      return ms;
    });
/**
 * A duration of at most `maxMs`; with `positive`, also more than 0 (for bounds where 0 would mean "no limit", as it
 * does to Node's http server).
 */
const boundedDuration = (fallback: string, maxMs: number, options: { positive?: boolean } = {}) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      const ms = parseDuration(v);
      if (ms === undefined || ms > maxMs || (options.positive && ms <= 0)) {
        const range = options.positive ? `more than 0 and at most ${maxMs} ms` : `at most ${maxMs} ms`;
        ctx.addIssue({ code: 'custom', message: `expected a duration such as 500ms or 10s, ${range}` });
        return z.NEVER;
      }
      return ms;
    });
/** A bound that must hold: more than 0 and at most `maxMs`. */
const bound = (fallback: string, maxMs: number) => boundedDuration(fallback, maxMs, { positive: true });
const optionalDuration = z
  .string()
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v.trim() === '') return undefined;
    const ms = parseDuration(v);
    if (ms === undefined || ms <= 0) {
      ctx.addIssue({ code: 'custom', message: 'expected a duration such as 500ms, 30s or 5m' });
      return z.NEVER;
    }
    return ms;
  });
const url = (protocols: readonly string[], what: string) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `expected a ${what} URL (${protocols.join(' or ')})` },
  );
/** A string whose blank value counts as unset (compose and .env files write `NAME=` for "not set"); trimmed. */
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
/**
 * IPv4/IPv6 addresses and CIDR ranges, comma-separated (INGEST_ALLOWED_SOURCES, CONSOLE_TRUSTED_PROXIES); blank or
 * empty means unset. A bad entry is named, and a range with host bits set is refused (see source-ranges.ts).
 */
const sourceRanges = optionalString.transform((v, ctx): readonly SourceRange[] | undefined => {
  if (v === undefined) return undefined;
  const ranges = parseSourceRanges(v);
  if (typeof ranges === 'string') {
    ctx.addIssue({ code: 'custom', message: `expected IP addresses or CIDR blocks, comma-separated: ${ranges}` });
    return z.NEVER;
  }
  return ranges.length > 0 ? ranges : undefined;
});
/** An optional URL of `protocols`, blank meaning unset. */
const optionalUrl = (protocols: readonly string[], what: string) =>
  optionalString.pipe(url(protocols, what).optional());

/**
 * Every environment variable the pipeline reads, with its default. The public ones are docs/design.md's contract;
 * the rest are documented in README's configuration table.
 */
const schema = z.object({
  /**
   * Postgres connection string. In production the worker's and the console's own login role, a member of `mcb_app`
   * (migration 0007; docs/deployment.md, "Database roles"), never the tables' owner.
   */
  DATABASE_URL: url(['postgres:', 'postgresql:'], 'postgres').default(
    'postgres://postgres@127.0.0.1:5432/merchant_callbacks',
  ),
  /**
   * Where `pnpm db:migrate` connects: as the tables' owner (the apps' DATABASE_URL role may not change the schema), and
   * at Postgres itself when DATABASE_URL points at PgBouncer (migrations hold a session advisory lock, which
   * transaction pooling cannot keep). @defaultValue DATABASE_URL
   */
  DATABASE_MIGRATION_URL: optionalUrl(['postgres:', 'postgresql:'], 'postgres'),
  /** Redis for BullMQ (empty counts as unset: a compose env file empties it to choose another topology). */
  REDIS_URL: optionalString.pipe(url(['redis:', 'rediss:'], 'redis').default('redis://127.0.0.1:6379')),
  /**
   * Redis through Sentinel instead of REDIS_URL: the sentinels as `host:port[,host:port...]`, with
   * REDIS_SENTINEL_NAME; every process finds the primary through them and follows a failover without a restart.
   */
  REDIS_SENTINELS: optionalString,
  /** The master group name the sentinels monitor (with REDIS_SENTINELS). */
  REDIS_SENTINEL_NAME: optionalString,
  /**
   * Redis Cluster instead of REDIS_URL: seed nodes as `host:port[,host:port...]` (ioredis finds the others). Every key
   * of ours lives in one slot, so QUEUE_PREFIX must hold a hash tag such as `{mcb}`.
   */
  REDIS_CLUSTER_NODES: optionalString,
  /** Password of the Redis data nodes behind REDIS_SENTINELS or REDIS_CLUSTER_NODES (with REDIS_URL it goes in the URL). */
  REDIS_PASSWORD: optionalString,
  /** Password the sentinels themselves ask for (Redis `requirepass` on the sentinels), with REDIS_SENTINELS. */
  REDIS_SENTINEL_PASSWORD: optionalString,
  /**
   * TLS to the sentinels and the data nodes of REDIS_SENTINELS, or to the nodes of REDIS_CLUSTER_NODES. With REDIS_URL
   * write `rediss://` instead (this setting is then refused, so one connection cannot be half-configured).
   */
  REDIS_TLS: bool(false),
  /**
   * PEM file of the CA(s) that sign the Redis servers' certificates (a private CA), for `rediss://` or REDIS_TLS.
   * @defaultValue Node's bundled public CAs
   */
  REDIS_TLS_CA_FILE: optionalString,
  /** BullMQ key prefix; on Redis Cluster it must hold a hash tag such as `{mcb}`. */
  QUEUE_PREFIX: z.string().min(1).default('mcb'),
  /** Our merchant number, as the platform knows it. */
  MERCHANT_NO: optionalString,
  /** Comma-separated PEM private key files; the first is current, the others are tried during a rotation. */
  MERCHANT_PRIVATE_KEY_FILE: optionalString,
  /** The platform's `{base_url}`. */
  PLATFORM_BASE_URL: optionalUrl(['http:', 'https:'], 'http(s)'),
  /**
   * Accept an `http://` PLATFORM_BASE_URL (local stacks, the demo, tests). Get order is the only thing that makes an
   * unsigned callback trustworthy, so production requires https; with this set, every start warns. Never read from a
   * `.env` file (scripts/lib/env-file.ts); an operator's command (role `cli`) may reach a loopback platform without it.
   */
  PLATFORM_ALLOW_HTTP: bool(false),
  /** Path of Get order under the base URL (the spec does not show it). */
  PLATFORM_GET_ORDER_PATH: z.string().startsWith('/').default('/api/open/order/getOrder'),
  /** Body encoding of getPaymentMethods: `json` or `form`. */
  PLATFORM_CONTENT_TYPE: z.enum(['json', 'form']).default('json'),
  /** Overall deadline of one platform request. */
  PLATFORM_TIMEOUT: duration('10s'),
  /** Log lines as JSON (production) or through pino-pretty for a person at a terminal (`pnpm dev` sets pretty). */
  LOG_FORMAT: z.enum(['json', 'pretty']).default('json'),
  /** Log level of every process (pino): fatal, error, warn, info, debug, trace or silent. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * OpenTelemetry traces go to this OTLP/HTTP collector (the standard variable; OTEL_EXPORTER_OTLP_HEADERS and the
   * other OTEL_EXPORTER_OTLP_* variables apply too). Unset: no tracing, at no cost (docs/observability.md).
   */
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl(['http:', 'https:'], 'http(s)'),
  /** `console` prints spans to stdout (`pnpm dev --traces`); `none` turns tracing off; `otlp` needs the endpoint. */
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'console', 'none']).optional(),

  /** Address of the public callback listener. */
  INGEST_HOST: z.string().default('0.0.0.0'),
  /** Port of the public callback listener (the platform POSTs callbacks here). */
  INGEST_PORT: port(8080),
  /** Ops listener (metrics) of ingest; never the public one. */
  INGEST_METRICS_PORT: port(9464),
  /** Address of ingest's ops listener: loopback unless a scraper elsewhere needs it; never inherits INGEST_HOST. */
  INGEST_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** Ingest processes (RSA decryption is the main cost); 0 means one per core. */
  INGEST_WORKERS: z.coerce.number().int().min(0).max(256).default(1),
  /** Request body limit in bytes (4 blocks of a 4096-bit key fit with room to spare). */
  INGEST_BODY_LIMIT: z.coerce.number().int().min(256).max(1_048_576).default(4096),
  /** Most RSA blocks a callback may have, checked before any decryption (a genuine record fits in one). */
  INGEST_MAX_BLOCKS: z.coerce.number().int().min(1).max(64).default(4),
  /**
   * Share of Redis `maxmemory` that must stay free: below it ingest answers `503 fail` and `/readyz` fails, so the
   * platform retries later instead of filling Redis (the worker still completes and frees jobs). 0 disables it.
   */
  INGEST_REDIS_MIN_HEADROOM: z.coerce.number().min(0).max(0.9).default(0.1),
  /**
   * Bounds of the public listener, per connection: the time to receive a request's headers, and the whole request
   * (headers and body; a callback is a few KB), how long an idle keep-alive connection is kept, and how long a
   * socket may stay silent. A client beyond a bound gets `408 fail` (or is closed) so slow senders cannot pile up.
   */
  INGEST_HEADERS_TIMEOUT: bound('5s', 300_000),
  /** Time to receive a whole request, headers and body (beyond it: 408 fail, closed). */
  INGEST_REQUEST_TIMEOUT: bound('10s', 300_000),
  /** How long an idle keep-alive connection is kept after a reply. */
  INGEST_KEEPALIVE_TIMEOUT: bound('5s', 300_000),
  /** A connection silent that long is closed. */
  INGEST_IDLE_TIMEOUT: bound('10s', 300_000),
  /**
   * Time to receive a request's body once its headers are in (a callback is a few KB, sent at once); beyond it:
   * `408 fail`, closed, so a client trickling its body frees its slot within about this long.
   */
  INGEST_BODY_TIMEOUT: bound('1s', 300_000),
  /**
   * Most open connections per ingest process: `auto` sizes it from the process's open-file limit and the memory
   * measured per idle connection (docs/ingest.md, logged at start), or a number. Beyond it new connections are
   * closed at once (counted and logged).
   */
  INGEST_MAX_CONNECTIONS: z
    .string()
    .default('auto')
    .transform((v, ctx) => {
      const text = v.trim();
      if (text === 'auto') return 'auto' as const;
      const n = /^\d+$/.test(text) ? Number(text) : NaN;
      if (!(n >= 1 && n <= 1_000_000)) {
        ctx.addIssue({ code: 'custom', message: 'expected auto or a whole number from 1 to 1000000' });
        return z.NEVER;
      }
      return n;
    }),
  /**
   * Most open connections from one source address per ingest process (IPv6: one /64), checked when a connection
   * opens; beyond it the connection is closed before a byte is read (counted and logged). 0: no limit. The default
   * is far above what a platform keeps in flight (ingest answers in milliseconds) and about a quarter of the smallest
   * `auto` cap (960). Behind a reverse proxy every connection comes from the proxy: set 0 and limit per client
   * address at the proxy.
   */
  INGEST_MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().min(0).max(1_000_000).default(256),
  /**
   * Only these source addresses may connect: comma-separated IPv4/IPv6 addresses or CIDR ranges (e.g. the
   * platform's published ranges, or the reverse proxy's address). Others are closed before a byte is read (counted
   * and logged). Unset: any address.
   */
  INGEST_ALLOWED_SOURCES: sourceRanges,
  /**
   * Replicas that must hold a callback's job (Redis `WAIT`, within the 1 s enqueue budget) before ingest answers
   * `success`; fewer answer `503 fail` and fail `/readyz`. 0: the primary's fsynced AOF is enough.
   */
  INGEST_MIN_REPLICAS: z.coerce.number().int().min(0).max(16).default(0),
  /**
   * Attempts of each callback job (its retry budget), set by ingest when it enqueues the job: a transient failure
   * (Postgres or the platform away) is retried with the worker's backoff (exponential with full jitter, capped at
   * 10 minutes) until the attempts are used up; then the job fails for good and waits for a replay. 60 attempts
   * ride out about 8 hours (8.2 h on average, 8.45 h at most; 20 give about 1.5 h, 10 about 4 minutes); the table
   * is in docs/worker.md ("Retry budget"). A replay gives a job a fresh budget of its attempts. @defaultValue 60
   */
  CALLBACK_JOB_ATTEMPTS: z.coerce.number().int().min(1).max(1000).default(60),
  /** Start even when Redis does not keep acknowledged writes (warns on every start). Never read from a `.env` file. */
  INGEST_ALLOW_VOLATILE_REDIS: bool(false),
  /**
   * Bound of ingest's stop after SIGTERM: readiness fails and the callbacks in flight finish; whatever is still open
   * then is forced closed and the process exits 1. Keep it below the orchestrator's grace period (Kubernetes 30 s;
   * `stop_grace_period` in compose, 30 s in ours). @defaultValue 25s
   */
  INGEST_SHUTDOWN_TIMEOUT: bound('25s', 600_000),

  /**
   * Jobs in flight per worker process, fixed. Unset (the default): the limit adapts to Get order's latency and
   * failures (Little's law: throughput × latency), between 8 and WORKER_MAX_IN_FLIGHT. Set it only to pin it.
   */
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(5000).optional(),
  /** Ceiling of the adaptive jobs in flight per worker process (ignored when WORKER_CONCURRENCY is set). */
  WORKER_MAX_IN_FLIGHT: z.coerce.number().int().min(8).max(5000).default(1024),
  /**
   * The deployment's Get order budget: most requests per second of every worker (callback jobs, the sweep) and the
   * console (re-verify, replay dry run) together, shared through Redis (work-conserving: an idle process holds no
   * share). Set it to the platform's limit for the merchant account, the same on every process; do not divide it.
   * 0: no cap.
   */
  PLATFORM_MAX_RPS: z.coerce.number().int().min(0).max(100_000).default(2000),
  /**
   * Most events waiting at once for their order to be registered; beyond it a new one goes to review at once
   * (Postgres) instead of waiting in Redis, and the sweep credits it once the order exists. 0: no cap.
   */
  WORKER_MAX_UNKNOWN_WAITING: z.coerce.number().int().min(0).max(10_000_000).default(10_000),
  /** Largest group commit: verified events of concurrent jobs committed in one transaction. */
  WORKER_COMMIT_BATCH: z.coerce.number().int().min(1).max(1000).default(64),
  /** Postgres connections per worker process (the group commit uses one; look-ups, reviews and the sweep the rest). */
  WORKER_DB_POOL: z.coerce.number().int().min(2).max(200).default(8),
  /** Port of the worker's ops listener (Prometheus /metrics). */
  WORKER_METRICS_PORT: port(9465),
  /** Address of the worker's ops listener (metrics, health). */
  WORKER_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /**
   * Job lock; a job whose worker died runs again once it lapses and a stalled check sees it.
   * @defaultValue max(30s, 3 × PLATFORM_TIMEOUT) when unset
   */
  WORKER_LOCK_DURATION: optionalDuration,
  /** How often each worker looks for stalled jobs. @defaultValue 30s when unset (BullMQ's default) */
  WORKER_STALLED_INTERVAL: optionalDuration,
  /**
   * Bound of the worker's stop after SIGTERM: jobs in progress finish and are recorded in Redis; whatever is still
   * open then is forced closed (BullMQ's forced close, connections dropped) and the process exits 1. Jobs left in
   * progress are logged by id: their locks lapse and they run again, and the receipt keeps that to one credit. Keep
   * it below the orchestrator's grace period (Kubernetes 30 s; `stop_grace_period` in compose, 30 s in ours).
   * @defaultValue 25s
   */
  WORKER_SHUTDOWN_TIMEOUT: bound('25s', 600_000),
  /** How long an event may wait for its order to be registered before it goes to review. */
  ORDER_GRACE_PERIOD: duration('15m'),
  /** How long Get order may answer "not final" before the event goes to review. */
  CONFIRM_MAX_WAIT: duration('2h'),
  /** How often the reconciliation sweep runs (one process at a time, under a Redis lock). */
  RECONCILE_INTERVAL: duration('5m'),
  /** Pending orders younger than this are left to their callbacks. */
  RECONCILE_MIN_AGE: duration('10m'),
  /** Pending orders older than this are no longer swept. */
  RECONCILE_MAX_AGE: duration('7d'),
  /** Get order requests per second that one sweep may make. */
  RECONCILE_RATE: z.coerce.number().positive().max(10_000).default(20),
  /** Orders read per batch of a sweep. */
  RECONCILE_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(100),
  /** How often the worker refreshes the stored payment-method catalog. */
  CATALOG_REFRESH_INTERVAL: duration('15m'),
  /** Receives a JSON message when a job exhausts its attempts or a review is opened. */
  ALERT_WEBHOOK_URL: optionalUrl(['http:', 'https:'], 'http(s)'),

  /** Address of the console's API and dashboard (internal: loopback by default). */
  CONSOLE_HOST: z.string().default('127.0.0.1'),
  /** Port of the console's API and dashboard. */
  CONSOLE_PORT: port(8081),
  /** Port of the console's ops listener (Prometheus /metrics). */
  CONSOLE_METRICS_PORT: port(9466),
  /** Address of the console's ops listener (metrics, health); never inherits CONSOLE_HOST. */
  CONSOLE_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** Bearer token of the single admin (named `admin`), for small setups. Required unless CONSOLE_OPERATORS_FILE is set. */
  CONSOLE_TOKEN: optionalString.pipe(z.string().min(16, 'expected at least 16 characters').optional()),
  /**
   * JSON file listing the console's operators: `[{"name", "role": "viewer"|"operator"|"admin"|"service", "tokenSha256"}]`
   * (the SHA-256 of each operator's bearer token, hex; `service`: a machine client such as the shop, which registers
   * orders and reads the API only). Read once at start. @defaultValue unset (CONSOLE_TOKEN only)
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
  /** Where `pnpm cli` reaches the console's API. @defaultValue http://CONSOLE_HOST:CONSOLE_PORT (127.0.0.1 for 0.0.0.0) */
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
   * open then is forced closed and the process exits 1. Keep it below the orchestrator's grace period. @defaultValue 25s
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

  /** Address of the sandbox (the simulated platform; local stacks and tests only). */
  SANDBOX_HOST: z.string().default('127.0.0.1'),
  /** Port of the sandbox. */
  SANDBOX_PORT: port(8090),
  /** The merchant number the sandbox simulates. @defaultValue MERCHANT_NO */
  SANDBOX_MERCHANT_NO: optionalString,
  /** The merchant's public key, to encrypt callbacks. @defaultValue derived from MERCHANT_PRIVATE_KEY_FILE's first file */
  SANDBOX_MERCHANT_PUBLIC_KEY_FILE: optionalString,
  /** Where the sandbox POSTs pay-in callbacks (orders may name their own). */
  SANDBOX_PAYIN_CALLBACK_URL: optionalString,
  /** Where the sandbox POSTs payout callbacks. */
  SANDBOX_PAYOUT_CALLBACK_URL: optionalString,
  /** Speed of the simulated platform clock (600: the 2-hour retry schedule in 12 s). */
  SANDBOX_TIME_SCALE: z.coerce.number().positive('expected a number > 0').max(1_000_000).default(1),
  /** Allow callback URLs on this machine or a private network. */
  SANDBOX_ALLOW_LOCAL_CALLBACKS: bool(true),
  /** Delay of a callback's first attempt, in real time. */
  SANDBOX_FIRST_ATTEMPT_DELAY: boundedDuration('1s', 30_000),
  /** How long the sandbox waits for the merchant's reply to one attempt. */
  SANDBOX_REPLY_TIMEOUT: boundedDuration('10s', 600_000),
  /** The sandbox a CLI (`pnpm sandbox`) talks to. */
  SANDBOX_URL: url(['http:', 'https:'], 'http(s)').default('http://127.0.0.1:8090'),
});

export type Config = Readonly<z.output<typeof schema>> & { readonly role: AppRole };

const REQUIRED: Record<AppRole, readonly (keyof z.output<typeof schema>)[]> = {
  ingest: ['MERCHANT_NO', 'MERCHANT_PRIVATE_KEY_FILE'],
  worker: ['MERCHANT_NO', 'PLATFORM_BASE_URL'],
  console: ['MERCHANT_NO', 'PLATFORM_BASE_URL'],
  sandbox: [],
  cli: [],
};

/** Settings a role needs one of: the first is named in the error, the second is its fallback. */
const REQUIRED_EITHER: Partial<
  Record<AppRole, readonly (readonly [keyof z.output<typeof schema>, keyof z.output<typeof schema>])[]>
> = {
  console: [['CONSOLE_TOKEN', 'CONSOLE_OPERATORS_FILE']],
  sandbox: [
    ['SANDBOX_MERCHANT_NO', 'MERCHANT_NO'],
    ['SANDBOX_MERCHANT_PUBLIC_KEY_FILE', 'MERCHANT_PRIVATE_KEY_FILE'],
  ],
};

/** One variable of the schema: its name, its default as written in the environment, and which roles require it. */
export interface ConfigVariable {
  name: string;
  defaultValue: string | undefined;
  requiredFor: AppRole[];
}

/** The default a schema entry gives an unset variable (found through its pipes and wrappers), as text. */
function defaultOf(entry: z.ZodType): string | undefined {
  const queue: unknown[] = [entry];
  for (let seen = 0; queue.length > 0 && seen < 20; seen++) {
    const def = (
      queue.shift() as {
        _zod: { def: { type: string; defaultValue?: unknown; in?: unknown; out?: unknown; innerType?: unknown } };
      }
    )._zod.def;
    if (def.type === 'default') return String(def.defaultValue);
    queue.push(...[def.in, def.innerType, def.out].filter(Boolean));
  }
  return undefined;
}

/** Every variable the config schema reads, in schema order (for `.env.example` and its drift test). */
export function configVariables(): ConfigVariable[] {
  return Object.entries(schema.shape).map(([name, entry]) => ({
    name,
    defaultValue: defaultOf(entry as z.ZodType),
    requiredFor: (Object.keys(REQUIRED) as AppRole[]).filter((role) =>
      (REQUIRED[role] as readonly string[]).includes(name),
    ),
  }));
}

/** The hash tag of a key prefix (`{mcb}` in `{mcb}` or `x{mcb}y`), as Redis Cluster reads it; undefined without one. */
export function hashTagOf(prefix: string): string | undefined {
  const open = prefix.indexOf('{');
  if (open < 0) return undefined;
  const close = prefix.indexOf('}', open + 1);
  return close > open + 1 ? prefix.slice(open + 1, close) : undefined;
}

/**
 * Exactly one Redis topology: REDIS_URL (the default), REDIS_SENTINELS with REDIS_SENTINEL_NAME, or
 * REDIS_CLUSTER_NODES (with a hash tag in QUEUE_PREFIX, so that every key of a queue lands in one slot).
 */
function redisTopologyProblems(values: z.output<typeof schema>, env: Record<string, string | undefined>): string[] {
  const problems: string[] = [];
  const chosen = [
    env.REDIS_URL?.trim() ? 'REDIS_URL' : undefined,
    values.REDIS_SENTINELS !== undefined ? 'REDIS_SENTINELS' : undefined,
    values.REDIS_CLUSTER_NODES !== undefined ? 'REDIS_CLUSTER_NODES' : undefined,
  ].filter((v): v is string => v !== undefined);
  if (chosen.length > 1)
    problems.push(
      `${chosen.join(', ')}: set exactly one Redis topology (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES), not ${chosen.length}`,
    );
  if (values.REDIS_SENTINELS !== undefined) {
    const nodes = parseRedisNodes(values.REDIS_SENTINELS);
    if (typeof nodes === 'string') problems.push(`REDIS_SENTINELS: ${nodes}`);
    if (values.REDIS_SENTINEL_NAME === undefined)
      problems.push('REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the master group name) (unset)');
  } else if (values.REDIS_SENTINEL_NAME !== undefined) {
    problems.push('REDIS_SENTINEL_NAME: only with REDIS_SENTINELS (unset)');
  }
  if (values.REDIS_SENTINEL_PASSWORD !== undefined && values.REDIS_SENTINELS === undefined) {
    problems.push('REDIS_SENTINEL_PASSWORD: only with REDIS_SENTINELS (unset)');
  }
  if (values.REDIS_TLS && values.REDIS_SENTINELS === undefined && values.REDIS_CLUSTER_NODES === undefined) {
    problems.push(
      'REDIS_TLS: only with REDIS_SENTINELS or REDIS_CLUSTER_NODES; for a single node write a rediss:// REDIS_URL',
    );
  }
  if (
    values.REDIS_TLS_CA_FILE !== undefined &&
    !values.REDIS_TLS &&
    !(
      values.REDIS_SENTINELS === undefined &&
      values.REDIS_CLUSTER_NODES === undefined &&
      values.REDIS_URL.startsWith('rediss:')
    )
  ) {
    problems.push('REDIS_TLS_CA_FILE: only with TLS to Redis (a rediss:// REDIS_URL, or REDIS_TLS=true)');
  }
  if (values.REDIS_CLUSTER_NODES !== undefined) {
    const nodes = parseRedisNodes(values.REDIS_CLUSTER_NODES);
    if (typeof nodes === 'string') problems.push(`REDIS_CLUSTER_NODES: ${nodes}`);
    if (hashTagOf(values.QUEUE_PREFIX) === undefined) {
      problems.push(
        `QUEUE_PREFIX: must hold a hash tag such as {mcb} with REDIS_CLUSTER_NODES, so that every key of a queue is in one ` +
          `slot (BullMQ's scripts touch several keys at once) (got ${JSON.stringify(values.QUEUE_PREFIX.slice(0, 60))})`,
      );
    }
  }
  return problems;
}

/** Whether a URL's host is this machine (127.0.0.0/8, ::1, localhost). */
function isLoopbackUrl(raw: string): boolean {
  const host = new URL(raw).hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * A proxy identity needs the addresses it may come from and the file that gives it a role; operators' sessions need
 * a key of their own (a random one per process would log every operator out at each restart, and differ between
 * instances).
 */
function consoleAuthProblems(values: z.output<typeof schema>, role: string): string[] {
  const problems: string[] = [];
  if (
    role === 'console' &&
    values.CONSOLE_OPERATORS_FILE !== undefined &&
    values.CONSOLE_SESSION_SECRET === undefined
  ) {
    problems.push(
      "CONSOLE_SESSION_SECRET: required with CONSOLE_OPERATORS_FILE (the key of the operators' sessions, 32+ random characters; never CONSOLE_TOKEN) (unset)",
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

/** One line per problem: `NAME: what was wrong (got "…")`. */
function describeIssues(issues: readonly z.core.$ZodIssue[], env: Record<string, string | undefined>): string[] {
  return issues.map((issue) => {
    const name = String(issue.path[0] ?? '(root)');
    const raw = env[name];
    const got = raw === undefined ? 'unset' : `got ${JSON.stringify(raw.length > 60 ? `${raw.slice(0, 57)}...` : raw)}`;
    const secret = /TOKEN|KEY|SECRET/.test(name) ? 'value hidden' : got;
    return `${name}: ${issue.message} (${secret})`;
  });
}

/**
 * Parse and validate the environment once. Throws one {@link AppError} `CONFIG_INVALID` whose message lists every
 * bad or missing variable by name. Only `main.ts` files call this; everything else receives the frozen result.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env, role: AppRole = 'cli'): Config {
  const parsed = schema.safeParse(env);
  const problems = parsed.success ? [] : describeIssues(parsed.error.issues, env);
  if (parsed.success || problems.length > 0) {
    const values = parsed.success ? parsed.data : undefined;
    for (const name of REQUIRED[role]) {
      const alreadyNamed = problems.some((p) => p.startsWith(`${name}:`));
      if (!alreadyNamed && (values ? values[name] === undefined : !env[name]?.trim())) {
        problems.push(`${name}: required for ${role} (unset)`);
      }
    }
    if (
      values?.PLATFORM_BASE_URL?.startsWith('http:') &&
      !values.PLATFORM_ALLOW_HTTP &&
      // An operator's command (`pnpm cli`, `pnpm sandbox`) confirms no callback; to a platform on this machine (the local
      // sandbox) its requests never leave the host. Worker and console still need the explicit PLATFORM_ALLOW_HTTP.
      !(role === 'cli' && isLoopbackUrl(values.PLATFORM_BASE_URL)) &&
      !problems.some((p) => p.startsWith('PLATFORM_BASE_URL:'))
    ) {
      problems.push(
        'PLATFORM_BASE_URL: expected an https URL: Get order is what confirms an unsigned callback, so it must not travel in clear; ' +
          'set PLATFORM_ALLOW_HTTP=true for a local stack',
      );
    }
    if (values) problems.push(...redisTopologyProblems(values, env));
    if (values) problems.push(...consoleAuthProblems(values, role));
    if (values && values.INGEST_HEADERS_TIMEOUT > values.INGEST_REQUEST_TIMEOUT) {
      problems.push(
        'INGEST_HEADERS_TIMEOUT: must not exceed INGEST_REQUEST_TIMEOUT (the request bound includes its headers)',
      );
    }
    for (const [name, fallback] of REQUIRED_EITHER[role] ?? []) {
      const set = (n: string) => (values ? values[n as keyof typeof values] !== undefined : Boolean(env[n]?.trim()));
      if (!set(name) && !set(fallback) && !problems.some((p) => p.startsWith(`${name}:`))) {
        problems.push(`${name}: required for ${role} (or ${fallback} to fall back on) (unset)`);
      }
    }
  }
  if (problems.length > 0 || !parsed.success) {
    throw new AppError(ErrorCodes.CONFIG_INVALID, `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  return Object.freeze({ ...parsed.data, role });
}

/**
 * Settings that are allowed but unsafe in production, one line each; every main logs them at warn on start.
 */
export function configWarnings(config: Config): string[] {
  const warnings: string[] = [];
  if (config.role === 'console' && !config.CONSOLE_SESSION_SECRET) {
    warnings.push(
      'CONSOLE_SESSION_SECRET unset: a random session key per start, so dashboard sessions end when the console restarts and are not shared by several consoles',
    );
  }
  if (
    config.role === 'console' &&
    config.PLATFORM_MAX_RPS > 0 &&
    config.CONSOLE_REPLAY_MAX_RATE > config.PLATFORM_MAX_RPS
  ) {
    warnings.push(
      `CONSOLE_REPLAY_MAX_RATE (${config.CONSOLE_REPLAY_MAX_RATE}) is above PLATFORM_MAX_RPS (${config.PLATFORM_MAX_RPS}): a replay's Get orders come out of the fleet's budget, so it cannot go faster`,
    );
  }
  if (config.PLATFORM_ALLOW_HTTP && config.PLATFORM_BASE_URL?.startsWith('http:')) {
    warnings.push(
      'PLATFORM_ALLOW_HTTP=true: Get order goes over plain http; anyone on that path could confirm a forged callback (local stacks only)',
    );
  }
  return warnings;
}
