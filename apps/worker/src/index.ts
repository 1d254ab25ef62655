// The worker's own pieces: the BullMQ workers, their metrics and alerts. The money path is @mcb/settlement.
export { alertOnReviewOpened, createAlerter, type Alerter } from './alerts.ts';
export { attemptReport, createArrivalRecorder, type ArrivalRecorder, type AttemptReport } from './arrival-recorder.ts';
export { createCallbackWorker, type CallbackWorker, type CallbackWorkerDeps } from './callback-worker.ts';
export { createWorkerMetrics, type WorkerMetrics } from './metrics.ts';
export {
  createMaintenanceWorker,
  type MaintenanceResult,
  type MaintenanceWorker,
  type MaintenanceWorkerDeps,
} from './maintenance-worker.ts';
