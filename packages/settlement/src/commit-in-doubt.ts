import type { Database } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { CommitResult } from './commit-types.ts';
import { poolOf } from './sql.ts';

// A COMMIT whose reply never came: the transaction may or may not have committed. Its receipts say which: their ids
// come from a sequence and are never reused, so they exist exactly when it committed.

/** The receipt whose commit a {@link ErrorCodes.DB_COMMIT_IN_DOUBT} error (or a note of one) names, if any. */
export function inDoubtReceiptOf(text: string): number | undefined {
  const m = /COMMIT of receipt (\d+) in doubt/.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** The error one event of an in-doubt batch fails with: it names the receipt the event may have committed. */
export function inDoubt(receiptId: number, cause: unknown): AppError {
  return new AppError(
    ErrorCodes.DB_COMMIT_IN_DOUBT,
    `COMMIT of receipt ${receiptId} in doubt: its reply was lost and Postgres could not be asked`,
    {
      transient: true,
      cause,
      details: { receiptId },
    },
  );
}

/** After a failed COMMIT: the results when the transaction's receipts are there (it committed), else the error. */
export async function committedAfterAll(
  db: Database,
  results: CommitResult[],
  error: unknown,
): Promise<CommitResult[]> {
  const receiptIds = results.flatMap((r) => (r.status === 'applied' ? [r.receiptId] : []));
  // Nothing was applied: whatever happened, running the events again decides them the same way.
  if (receiptIds.length === 0) throw error;
  let found: number;
  try {
    const { rows } = await poolOf(db).query<{ n: number }>(
      'SELECT count(*)::int AS n FROM callback_receipts WHERE id = ANY($1::bigint[])',
      [receiptIds],
    );
    found = rows[0]!.n;
  } catch {
    // Cannot tell now (Postgres restarting). Each event is failed with the receipt it may have committed, so that
    // its job's next attempt can recognise that receipt as its own (see ApplyOptions.wasInDoubt).
    throw new AppError(ErrorCodes.DB_COMMIT_IN_DOUBT, 'COMMIT in doubt', {
      transient: true,
      cause: error,
      details: { receipts: results.map((r) => (r.status === 'applied' ? r.receiptId : null)) },
    });
  }
  if (found === receiptIds.length) return results;
  if (found === 0) throw error;
  throw new Error(
    `group commit: ${found} of ${receiptIds.length} receipts of one transaction found after a failed COMMIT`,
  );
}
