export { applyEvent, type ApplyDeps, type ApplyOptions, type ApplyOutcome, type OpenedReview } from './apply-event.ts';
export { createCallbackWorker, type CallbackWorker, type CallbackWorkerDeps } from './callback-worker.ts';
export { commitEvent, type CommitInput, type CommitResult } from './commit-event.ts';
export { createWorkerMetrics, type WorkerMetrics } from './metrics.ts';
export { recordReview, type RecordedReview } from './record-review.ts';
export {
  callbackBackoffDelay,
  classifyError,
  toJobError,
  type BackoffOptions,
  type ErrorClass,
} from './retry-policy.ts';
export {
  checkOwnOrder,
  PAYIN_FINAL_STATES,
  PAYOUT_FINAL_STATES,
  targetStatus,
  verifyConfirmation,
  type TargetStatus,
  type VerifyFailure,
} from './verify.ts';
export { createMaintenanceWorker, type MaintenanceResult, type MaintenanceWorker, type MaintenanceWorkerDeps } from './maintenance-worker.ts';
export {
  acquireSweepLock,
  createReconcileMetrics,
  runSweep,
  sweepLockKey,
  sweepSettingsFromConfig,
  type ReconcileMetrics,
  type SweepDeps,
  type SweepOptions,
  type SweepReport,
  type SweepSettings,
} from './reconcile/index.ts';
