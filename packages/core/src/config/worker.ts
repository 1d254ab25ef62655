/**
 * The worker: jobs in flight, the group commit, the job lock, how long an event waits for its order or a final
 * state, the reconciliation sweep and the catalog refresh (docs/worker.md). PLATFORM_MAX_RPS, the fleet's Get order
 * budget, is listed here beside the worker's concurrency it caps (the console draws on it too).
 */
import { z } from 'zod';
import { bound, duration, optionalDuration, optionalUrl, port } from './fields.ts';

/** The worker area of the config schema (composed in index.ts). */
export const workerFields = {
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
};
