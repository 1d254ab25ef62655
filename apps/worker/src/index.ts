// The worker's own pieces: runWorker (a whole worker process), and the BullMQ workers, their metrics and alerts it
// builds. The money path is @mcb/settlement.
export { runWorker, type RunWorkerOptions, type WorkerRunner } from './run-worker.ts';
export { type Lane, type WorkerTuning } from './lane.ts';
export { createAdaptiveLimit, type AdaptiveLimit, type AdaptiveLimitOptions } from './adaptive-concurrency.ts';
export { alertOnReviewOpened, createAlerter, type AlertMessage, type Alerter } from './alerts.ts';
export { attemptReport, createArrivalRecorder, type ArrivalRecorder, type AttemptReport } from './arrival-recorder.ts';
export { createCallbackWorker, type CallbackWorker, type CallbackWorkerDeps } from './callback-worker.ts';
export { createWorkerMetrics, type WorkerMetrics } from './metrics.ts';
export {
  createMaintenanceWorker,
  type MaintenanceResult,
  type MaintenanceWorker,
  type MaintenanceWorkerDeps,
} from './maintenance-worker.ts';
