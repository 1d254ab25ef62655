import type { Database } from '@mcb/core/db';
import type { CallbackJob } from '@mcb/core/queue';
import type { AppliedNote } from './decide.ts';
import { poolOf } from './sql.ts';

const FIELD_WORDS: Record<string, string> = { quantity: 'Quantity' };

/**
 * The note's line: both jobs and both values, and why neither is flagged. `jobId` is the job of the callback that
 * differed, `note.appliedJobId` the one the receipt was applied from.
 */
export function orderNoteLine(note: AppliedNote, jobId: string | undefined): string {
  const fields = note.differences.map(
    (d) => `${FIELD_WORDS[d.field] ?? d.field} ${d.callback ?? 'none'} (applied: ${d.applied ?? 'none'})`,
  );
  const applied = note.appliedJobId ? `job ${note.appliedJobId}` : 'a callback without a recorded job';
  return (
    `job ${jobId ?? '(none)'} claims ${fields.join(', ')}; receipt ${note.receiptId} was applied from ${applied}. ` +
    'Get order does not confirm this field, so neither callback is suspected: the later one is a duplicate, nothing ' +
    'paid twice.'
  );
}

/**
 * Note on the order that a duplicate of an applied pair differs in a field Get order does not confirm (one row per
 * receipt and job; another copy of the same job counts on it). Off the money path's decision: the duplicate is
 * already decided, and the note only tells a person.
 */
export async function recordOrderNote(
  db: Database,
  event: CallbackJob,
  jobId: string | undefined,
  note: AppliedNote,
): Promise<void> {
  await poolOf(db).query(
    `INSERT INTO order_notes (merchant_order_no, order_no, state, receipt_id, job_id, applied_job_id, topic, detail, details,
                              merchant_no)
     VALUES ($1, $2, $3, $4, $5, $6, 'unconfirmed-field-differs', $7, $8::jsonb, $9)
     ON CONFLICT (receipt_id, job_id, topic) DO UPDATE SET seen = order_notes.seen + 1, last_seen_at = now()`,
    [
      event.merchantOrderNo,
      event.orderNo,
      event.state,
      note.receiptId,
      jobId ?? '',
      note.appliedJobId,
      orderNoteLine(note, jobId),
      JSON.stringify({ differences: note.differences }),
      event.merchantNo,
    ],
  );
}
