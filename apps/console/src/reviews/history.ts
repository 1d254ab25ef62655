import { operatorActions, reviewAttempts, reviewOccurrences, type Database } from '@mcb/core/db';
import { and, asc, eq, inArray, like, or } from 'drizzle-orm';
import { z } from 'zod';

/** One distinct event of a review, as GET /api/reviews shows it. */
export const reviewEventSchema = z.object({
  hash: z.string().describe('SHA-256 of the event without its arrival time and source: identical copies share it'),
  merchantNo: z.string().nullable(),
  merchantOrderNo: z.string().nullable(),
  state: z.number().int().nullable(),
  fiatAmount: z.string().nullable().describe('Pay-in: the fiat amount the event claims'),
  quantity: z.string().nullable().describe('Pay-in: the USDT quantity the event claims'),
  payTime: z.string().nullable(),
  receivedAt: z.string().nullable().describe('When ingest accepted the first copy'),
  reasonCode: z.string().describe('What verification found for this event'),
  reason: z.string(),
  seen: z.number().int().describe('Copies of this event that landed in the review'),
  firstSeenAt: z.string(),
  lastSeenAt: z.string(),
});

/** One entry of a review's history: a re-verify, or the commit of its pair. */
export const reviewAttemptSchema = z.object({
  at: z.string(),
  source: z.enum(['callback', 'reconcile', 'review']).describe('review: a console re-verify'),
  outcome: z
    .enum(['applied', 'already-applied', 'kept-open', 'unconfirmed', 'failed'])
    .describe(
      'failed: a re-verify that could not finish (platform or database unreachable); nothing changed, the review stays open',
    ),
  reasonCode: z.string().nullable(),
  reason: z.string(),
  operator: z.string().nullable().optional().describe('Who re-verified (failed re-verifies, from the audit)'),
});

export type ReviewEventView = z.output<typeof reviewEventSchema>;
export type ReviewAttemptView = z.output<typeof reviewAttemptSchema>;

const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The distinct events and the attempts of the given reviews, oldest first, by review id (two queries). */
export async function loadReviewHistory(
  db: Database,
  ids: readonly number[],
): Promise<{ events: Map<number, ReviewEventView[]>; attempts: Map<number, ReviewAttemptView[]> }> {
  const events = new Map<number, ReviewEventView[]>();
  const attempts = new Map<number, ReviewAttemptView[]>();
  if (ids.length === 0) return { events, attempts };
  const [occurrenceRows, attemptRows, failedRows] = await Promise.all([
    db
      .select()
      .from(reviewOccurrences)
      .where(inArray(reviewOccurrences.reviewId, [...ids]))
      .orderBy(asc(reviewOccurrences.id)),
    db
      .select()
      .from(reviewAttempts)
      .where(inArray(reviewAttempts.reviewId, [...ids]))
      .orderBy(asc(reviewAttempts.id)),
    // A re-verify that threw (Get order or the database unreachable) leaves no attempt row, only its audit row.
    db
      .select()
      .from(operatorActions)
      .where(
        and(
          eq(operatorActions.action, 'reviews.reverify'),
          inArray(
            operatorActions.target,
            ids.map((id) => `review:${id}`),
          ),
          or(like(operatorActions.outcome, 'failed:%'), eq(operatorActions.outcome, 'pending')),
        ),
      )
      .orderBy(asc(operatorActions.id)),
  ]);
  for (const o of occurrenceRows) {
    const e = o.event;
    const list = events.get(o.reviewId) ?? [];
    list.push({
      hash: o.eventHash,
      merchantNo: text(e.merchantNo),
      merchantOrderNo: text(e.merchantOrderNo),
      state: typeof e.state === 'number' ? e.state : null,
      fiatAmount: text(e.fiatAmount),
      quantity: text(e.quantity),
      payTime: text(e.payTime),
      receivedAt: text(e.receivedAt),
      reasonCode: o.reasonCode,
      reason: o.reason,
      seen: o.seen,
      firstSeenAt: o.firstSeenAt.toISOString(),
      lastSeenAt: o.lastSeenAt.toISOString(),
    });
    events.set(o.reviewId, list);
  }
  for (const a of attemptRows) {
    const list = attempts.get(a.reviewId) ?? [];
    list.push({
      at: a.createdAt.toISOString(),
      source: a.source,
      outcome: a.outcome,
      reasonCode: a.reasonCode,
      reason: a.reason,
    });
    attempts.set(a.reviewId, list);
  }
  for (const f of failedRows) {
    const id = Number(f.target.slice('review:'.length));
    const code = f.outcome.startsWith('failed:') ? f.outcome.slice('failed:'.length) : null;
    const ended = code ? 'could not finish' : 'has no recorded outcome';
    const list = attempts.get(id) ?? [];
    list.push({
      at: f.at.toISOString(),
      source: 'review',
      outcome: 'failed',
      reasonCode: code,
      reason: `re-verify by ${f.operator} ${ended}; nothing changed (asked because: ${f.reason})`.slice(0, 500),
      operator: f.operator,
    });
    attempts.set(
      id,
      list.sort((a, b) => a.at.localeCompare(b.at)),
    );
  }
  return { events, attempts };
}
