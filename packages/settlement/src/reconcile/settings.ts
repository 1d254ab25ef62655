import type { Config } from '@mcb/core/config';
import type { SweepSettings } from './sweep.ts';

/** The sweep's settings from RECONCILE_MIN_AGE, RECONCILE_MAX_AGE, RECONCILE_RATE and RECONCILE_BATCH_SIZE. */
export function sweepSettingsFromConfig(
  config: Pick<Config, 'RECONCILE_MIN_AGE' | 'RECONCILE_MAX_AGE' | 'RECONCILE_RATE' | 'RECONCILE_BATCH_SIZE'>,
): SweepSettings {
  return {
    minAgeMs: config.RECONCILE_MIN_AGE,
    maxAgeMs: config.RECONCILE_MAX_AGE,
    ratePerSecond: config.RECONCILE_RATE,
    batchSize: config.RECONCILE_BATCH_SIZE,
  };
}
