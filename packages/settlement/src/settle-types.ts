import type { Database, Order } from '@mcb/core/db';
import type { ErrorCode } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { PlatformClient, PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import type { SettlementMetrics } from './metrics.ts';
import type { SettlementBatchers } from './settlement-batchers.ts';
import type { TargetStatus } from './verify.ts';

/** What settling an event needs. */
export interface ApplyDeps {
  db: Database;
  platform: PlatformClient;
  logger: Logger;
  metrics?: SettlementMetrics;
  /** Shared look-up and commit batchers; without them each event reads and commits alone. @defaultValue none */
  batchers?: SettlementBatchers;
  /** How long an event may wait for its order to be registered (ORDER_GRACE_PERIOD), in ms. @defaultValue 900000 */
  orderGracePeriodMs?: number;
  /** How long Get order may answer "not final" (CONFIRM_MAX_WAIT), in ms. @defaultValue 7200000 */
  confirmMaxWaitMs?: number;
  /** Clock, in ms since the epoch. @defaultValue Date.now */
  now?: () => number;
  /**
   * Told once when an event opens a review (not when it counts another occurrence of an open one), whichever path
   * it came by: a callback job, a reconciliation sweep or a console re-verify. Must not throw or block.
   */
  onReviewOpened?: (review: OpenedReview) => void;
  /** Called right after the transaction commits, before anything else (the crash tests die here). */
  afterCommit?: (outcome: ApplyOutcome) => void | Promise<void>;
}

/** Per-call options of `applyEvent` and the other entries of settle.ts. */
export interface ApplyOptions {
  /** When the event was first seen, in ms since the epoch; the waiting bounds count from here. @defaultValue event.receivedAt, else now */
  firstSeenAt?: number;
  /** Recorded on the receipt. */
  jobId?: string;
  /** Aborts the Get order call. */
  signal?: AbortSignal;
  /** Decide now: an event that would wait (order unknown, not final) goes to review instead. @defaultValue false */
  noWait?: boolean;
  /** The worker's unknown-order cap has no room: an event whose order is unknown goes to review now. @defaultValue false */
  unknownOrderCapFull?: boolean;
  /**
   * The open review this event is re-verified for (console re-verify): a failure is added to that review's history
   * as an attempt, instead of counting as another occurrence of the event, and its reason is left as it is.
   * @defaultValue none
   */
  reverifyOf?: number;
  /**
   * Whether an earlier attempt of this job may have committed this receipt without learning it (its COMMIT's reply
   * was lost and Postgres could not be asked: DB_COMMIT_IN_DOUBT). When the pair's receipt is one of those, this job
   * applied it, and reports `applied` (afterCommit, the outcome's log line) instead of `duplicate`. @defaultValue none
   */
  wasInDoubt?: (receiptId: number) => Promise<boolean>;
}

/** A review just opened: order numbers, state and reason, never the record's amounts. */
export interface OpenedReview {
  reviewId: number;
  kind: CallbackJob['kind'];
  orderNo: string;
  state: number;
  merchantOrderNo: string;
  code: ErrorCode;
  reason: string;
}

/** What applying an event came to. */
export type ApplyOutcome =
  | { status: 'applied'; outcome: TargetStatus; orderId: number; receiptId: number }
  | { status: 'duplicate'; reason: 'receipt-exists' | 'already-final' }
  | { status: 'review'; code: ErrorCode; reason: string; reviewId: number; opened: boolean }
  /** Not decidable yet (order not registered, Get order not final); try again later. Nothing was written. */
  | { status: 'deferred'; code: ErrorCode; reason: string };

/** What confirming an event came to: Get order's answer for our order, or already an outcome. */
export type Confirmation = { status: 'confirmed'; order: Order; confirmed: PlatformOrder } | ApplyOutcome;
