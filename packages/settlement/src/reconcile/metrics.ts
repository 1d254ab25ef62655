import { Counter, Gauge, type Registry } from '@mcb/core/metrics';

/** Prometheus metrics of the reconciliation sweep. */
export interface ReconcileMetrics {
  /** Sweeps by trigger (schedule, manual) and result (completed, stopped, busy, paused). */
  sweeps: Counter<'trigger' | 'result'>;
  /** Pending orders looked up with Get order, by kind. */
  scanned: Counter<'kind'>;
  /** Orders the sweep finalised, by kind and outcome (credited, succeeded, refused): what callbacks never delivered. */
  recovered: Counter<'kind' | 'outcome'>;
  /** Orders the sweep could not decide, by error code (the platform or Postgres failing): what stops a sweep. */
  errors: Counter<'code'>;
  /**
   * Get order answers that said nothing usable about an order, by code (PLATFORM_ERROR_CODE: a refusal such as 40404;
   * PLATFORM_HTTP_ERROR: a 3xx/4xx; PLATFORM_BAD_RESPONSE: code 0 without the order): the order is left pending and
   * asked again after its back-off. They never stop a sweep.
   */
  unknown: Counter<'code'>;
  /** When the last sweep finished, in seconds since the epoch. */
  lastSweepTimestamp: Gauge;
  /** How long the last sweep took, in seconds. */
  lastSweepDuration: Gauge;
  /** Pending orders older than RECONCILE_MAX_AGE at the last sweep: no sweep looks at them any more. */
  pendingBeyondMaxAge: Gauge;
}

/** Create and register the reconciliation metrics on `registry` (the worker's, or the console's for manual sweeps). */
export function createReconcileMetrics(registry: Registry): ReconcileMetrics {
  const registers = [registry];
  const metrics: ReconcileMetrics = {
    sweeps: new Counter({
      name: 'mcb_reconcile_sweeps_total',
      help: 'Reconciliation sweeps by trigger and result',
      labelNames: ['trigger', 'result'],
      registers,
    }),
    scanned: new Counter({
      name: 'mcb_reconcile_orders_scanned_total',
      help: 'Pending orders looked up by the sweep',
      labelNames: ['kind'],
      registers,
    }),
    recovered: new Counter({
      name: 'mcb_reconcile_recovered_total',
      help: 'Orders finalised by the sweep (their callbacks never arrived)',
      labelNames: ['kind', 'outcome'],
      registers,
    }),
    errors: new Counter({
      name: 'mcb_reconcile_errors_total',
      help: 'Orders the sweep could not decide, by error code',
      labelNames: ['code'],
      registers,
    }),
    unknown: new Counter({
      name: 'mcb_reconcile_unknown_total',
      help: 'Get order answers the sweep could not use for an order (left pending, asked again after a back-off), by code',
      labelNames: ['code'],
      registers,
    }),
    lastSweepTimestamp: new Gauge({
      name: 'mcb_reconcile_last_sweep_timestamp_seconds',
      help: 'When the last sweep finished',
      registers,
    }),
    lastSweepDuration: new Gauge({
      name: 'mcb_reconcile_last_sweep_duration_seconds',
      help: 'Duration of the last sweep',
      registers,
    }),
    pendingBeyondMaxAge: new Gauge({
      name: 'mcb_reconcile_pending_beyond_max_age',
      help: 'Pending orders older than RECONCILE_MAX_AGE (no longer swept)',
      registers,
    }),
  };
  // Every recovered series exists at 0 from the start: increase() cannot see a counter's first increment when its
  // series appears already at 1, so the first lost callback of a process would never fire CallbacksLost.
  for (const [kind, outcome] of [
    ['payin', 'credited'],
    ['payout', 'succeeded'],
    ['payout', 'refused'],
  ] as const)
    metrics.recovered.inc({ kind, outcome }, 0);
  return metrics;
}
