// The money path, shared by the worker (callback jobs, scheduled sweeps) and the console (re-verify, sweep now).
export { Batcher, type BatcherOptions, type Settled } from '@mcb/core/batcher';
export { commitEvent, commitEvents } from './commit.ts';
export type { CommitInput, CommitOptions, CommitResult } from './commit-types.ts';
export { inDoubtReceiptOf } from './commit-in-doubt.ts';
export {
  conflictFinding,
  decideAsking,
  decideConfirmed,
  decideEvent,
  waitsForUnknownOrder,
  waitedSince,
  type AppliedNote,
  type EventFacts,
  type Finding,
  type Ours,
  type Verdict,
  type WaitFacts,
} from './decide.ts';
export { unusableAnswer } from './unusable-answer.ts';
export { commitStarted, commitWaits, type CommitWaits } from './commit-watch.ts';
export { findOrder, lookUpEvent, lookUpEvents, type LookupKey, type LookupResult, type OrderKey } from './lookup.ts';
export type { SettlementMetrics } from './metrics.ts';
export { orderNoteLine, recordOrderNote } from './order-notes.ts';
export { judgePayTime, PAY_TIME_SKEW_MS, type PayTimeJudgement } from './pay-time.ts';
export { poolOf } from './sql.ts';
export { recordReview, recordReviewAttempt, type RecordedReview, type ReviewAttemptInput } from './record-review.ts';
export { reverifyReview, type ReverifyOutcome } from './reverify-review.ts';
export {
  callbackBackoffDelay,
  classifyError,
  describeJobError,
  discardsConnection,
  giveUp,
  isDatabaseDown,
  jobErrorCode,
  toJobError,
  TRANSIENT_SQLSTATES,
  TRANSIENT_SQLSTATE_CLASSES,
  type BackoffOptions,
  type ErrorClass,
} from './retry-policy.ts';
export { callbackRetryWindow, describeWindow, type RetryWindow } from './retry-window.ts';
export {
  applyConfirmed,
  applyEvent,
  confirmEvent,
  createSettlementBatchers,
  decideAndCommit,
  type ApplyDeps,
  type ApplyOptions,
  type ApplyOutcome,
  type Confirmation,
  type OpenedReview,
  type SettlementBatcherOptions,
  type SettlementBatchers,
} from './settle.ts';
export { checkOwnOrder, targetStatus, verifyConfirmation, type TargetStatus, type VerifyFailure } from './verify.ts';
export {
  acquireSweepLock,
  createRateLimiter,
  createReconcileMetrics,
  runSweep,
  sweepSettingsFromConfig,
  type RateLimiter,
  type ReconcileMetrics,
  type SweepDeps,
  type SweepLock,
  type SweepLockOptions,
  type SweepOptions,
  type SweepReport,
  type SweepSettings,
} from './reconcile/index.ts';
