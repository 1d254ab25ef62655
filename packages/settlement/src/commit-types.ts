import type { Order } from '@mcb/core/db';
import type { PlatformOrder } from '@mcb/core/platform';
import type { CallbackJob } from '@mcb/core/queue';
import type { TargetStatus } from './verify.ts';

// The group commit's contract, apart from commit.ts so that its leaves (the statements, the in-doubt check) need
// not import the orchestrator that imports them.

/** What the transaction did for one event. */
export type CommitResult =
  | { status: 'applied'; outcome: TargetStatus; receiptId: number; ledgerEntryId: number | undefined; eventId: number }
  /** The pair was applied before (receipt exists), or the order already has this outcome through another pair. */
  | { status: 'duplicate'; reason: 'receipt-exists' | 'already-final' }
  /** The order is no longer pending and not in the target status (e.g. payout succeeded, event says refused). */
  | { status: 'conflict'; currentStatus: Order['status']; currentPlatformOrderNo: string | null };

/** A verified event, our order and Get order's confirmation: what the group commit (`commitEvents`) writes. */
export interface CommitInput {
  event: CallbackJob;
  order: Order;
  confirmed: PlatformOrder;
  target: TargetStatus;
  jobId?: string | undefined;
}

/** Options of the group commit (`commitEvents`). */
export interface CommitOptions {
  /**
   * Longest wait for a row lock held by another transaction, in ms (Postgres `lock_timeout`, per transaction). A
   * committing batch holds its orders for milliseconds; a longer wait is a row held elsewhere (an operator's open
   * transaction, a stuck session), and the batch is split around it instead of waiting for the statement timeout.
   * 0 leaves the server's setting. @defaultValue 5000
   */
  lockTimeoutMs?: number;
}
