export { createReconcileMetrics, type ReconcileMetrics } from './metrics.ts';
export { createRateLimiter, type RateLimiter } from './rate-limiter.ts';
export { runSweep, type SweepDeps, type SweepOptions, type SweepReport, type SweepSettings } from './sweep.ts';
export { acquireSweepLock, type SweepLock, type SweepLockOptions } from './sweep-lock.ts';
export { sweepSettingsFromConfig } from './settings.ts';
