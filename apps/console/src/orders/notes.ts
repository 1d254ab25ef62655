/**
 * The order's notes on its timeline (order_notes): a callback for an applied pair that differed from what was applied
 * only in a field Get order does not confirm (Quantity). Not an alarm: either callback may be the made-up one, so the
 * row names both jobs and both values, and neither is flagged.
 */
import { orderNotes, type Database } from '@mcb/core/db';
import { asc, inArray } from 'drizzle-orm';

type NoteRow = typeof orderNotes.$inferSelect;

/** The notes on the receipts of the order's story (by receipt id: a note belongs to what was applied). */
export async function notesOfReceipts(db: Database, receiptIds: readonly number[]): Promise<NoteRow[]> {
  if (receiptIds.length === 0) return [];
  return db
    .select()
    .from(orderNotes)
    .where(inArray(orderNotes.receiptId, [...receiptIds]))
    .orderBy(asc(orderNotes.id))
    .limit(100);
}

/** One timeline row per note, at its first sighting, on the job that differed. */
export const noteEntry = (n: NoteRow) => ({
  at: n.firstSeenAt.toISOString(),
  source: 'note' as const,
  event: 'note' as const,
  orderNo: n.orderNo,
  state: n.state,
  jobId: n.jobId || null,
  attempt: null,
  code: null,
  detail: `${n.detail}${n.seen > 1 ? ` (seen ${n.seen} times)` : ''}`,
});
