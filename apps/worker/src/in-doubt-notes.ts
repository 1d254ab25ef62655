import { ErrorCodes } from '@mcb/core/errors';
import { jobNoteSchema } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';
import { inDoubtReceiptOf } from '@mcb/settlement';

/**
 * Whether one of a job's notes (the log lines at `logsKey`, written by its earlier failed attempts) says that this
 * receipt's COMMIT was in doubt: a receipt the job's earlier attempt committed without hearing back is its own credit,
 * not a duplicate.
 */
export async function noteSaysInDoubt(connection: RedisClient, logsKey: string, receiptId: number): Promise<boolean> {
  const lines = await connection.lrange(logsKey, 0, -1);
  return lines.some((line) => {
    try {
      const note = jobNoteSchema.parse(JSON.parse(line));
      return note.code === ErrorCodes.DB_COMMIT_IN_DOUBT && inDoubtReceiptOf(note.detail) === receiptId;
    } catch {
      return false; // not one of our notes
    }
  });
}
