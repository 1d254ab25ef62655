/**
 * Ingest, the public callback listener: its address, the bounds of each connection and request, who may connect,
 * and what it asks of Redis before it answers `success` (docs/ingest.md).
 */
import { z } from 'zod';
import { bool, bound, port, sourceRanges, type ValuesOf } from './fields.ts';

/** The ingest area of the config schema (composed in index.ts). */
export const ingestFields = {
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
   * Most callbacks a paused merchant may hold in Redis (its queue's waiting, delayed and prioritized jobs): past it,
   * that merchant's new callbacks get `503 fail` (the platform retries them) until it is resumed, so one long pause
   * cannot eat the Redis headroom of the others. A merchant that is not paused is never refused by it. 0: no bound.
   */
  MERCHANT_PAUSED_MAX_BACKLOG: z.coerce.number().int().min(0).max(100_000_000).default(100_000),
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
};

/** Bounds of the public listener that must agree with each other. */
export function ingestProblems(values: ValuesOf<typeof ingestFields>): string[] {
  return values.INGEST_HEADERS_TIMEOUT > values.INGEST_REQUEST_TIMEOUT
    ? ['INGEST_HEADERS_TIMEOUT: must not exceed INGEST_REQUEST_TIMEOUT (the request bound includes its headers)']
    : [];
}
