import type { Database } from '@mcb/core/db';
import { Batcher, type BatcherOptions } from '@mcb/core/batcher';
import { commitEvents } from './commit.ts';
import type { CommitInput, CommitResult } from './commit-types.ts';
import { lookUpEvents, type LookupKey, type LookupResult } from './lookup.ts';

/**
 * The batchers one process shares between its concurrent events: the look-ups before Get order and the group
 * commit after it. Without them each event reads and commits alone. Both are shared by every merchant of the process
 * and fair between them: each merchant's events wait in a queue of their own, and a batch is filled round-robin
 * across the merchants with waiting events, by weight, so a merchant's flood makes another merchant's event wait
 * behind at most one batch of it.
 */
export interface SettlementBatchers {
  lookups: Batcher<LookupKey, LookupResult>;
  commits: Batcher<CommitInput, CommitResult>;
}

/** Options of {@link createSettlementBatchers}. */
export interface SettlementBatcherOptions {
  /** Largest group commit (events per transaction). @defaultValue 64 */
  maxCommitBatch?: number;
  /** Largest look-up batch. @defaultValue 128 */
  maxLookupBatch?: number;
  /** Longest wait of a group commit for a row lock, in ms (CommitOptions.lockTimeoutMs). @defaultValue 5000 */
  commitLockTimeoutMs?: number;
  /** Told each batch's size as it starts. */
  onBatch?: (kind: 'lookup' | 'commit', size: number) => void;
  /** A merchant's share of each batch under contention (its `weight`), by merchant number. @defaultValue 1 each */
  merchantWeight?: (merchantNo: string) => number;
}

/** One process's batchers on `db` (one commit in flight at a time, two look-ups). */
export function createSettlementBatchers(db: Database, options: SettlementBatcherOptions = {}): SettlementBatchers {
  const onBatch = options.onBatch;
  const weightOf = options.merchantWeight;
  const lookups: BatcherOptions<LookupKey> = {
    maxBatch: options.maxLookupBatch ?? 128,
    maxInFlight: 2,
    onBatch: onBatch && ((n) => onBatch('lookup', n)),
    laneOf: (key) => key.merchantNo,
    weightOf,
  };
  const commits: BatcherOptions<CommitInput> = {
    maxBatch: options.maxCommitBatch ?? 64,
    maxInFlight: 1,
    onBatch: onBatch && ((n) => onBatch('commit', n)),
    laneOf: (input) => input.event.merchantNo,
    weightOf,
  };
  return {
    lookups: new Batcher((keys) => lookUpEvents(db, keys), lookups),
    commits: new Batcher((inputs) => commitEvents(db, inputs, { lockTimeoutMs: options.commitLockTimeoutMs }), commits),
  };
}
