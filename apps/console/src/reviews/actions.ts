import { reviews, type Database } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { PlatformClient } from '@mcb/core/platform';
import { reverifyReview } from '@mcb/settlement';
import { and, eq, sql } from 'drizzle-orm';
import { authorize, commitAction, performExternalAction, type Actor } from '../audit/perform.ts';
import { requirePlainText } from '../audit/text.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import { findReviewRow, getReview, reviewViews, type ReviewRow, type ReviewView } from './queries.ts';

/**
 * What the review actions need: re-verify runs the worker's money path (reverifyReview) with the console's own
 * clients.
 */
export interface ReviewActionDeps {
  db: Database;
  /** The platform client of the console's home merchant (used when `merchants` is not given). */
  platform: PlatformClient;
  /** The console's merchants: a review is re-verified with its own merchant's platform client. @defaultValue none */
  merchants?: ConsoleMerchants;
  logger: Logger;
}

/**
 * The platform client of the merchant whose review it is (reviews carry `merchant_no`): its base URL and number, so
 * Get order asks about the review's own order. A review of a number the console does not serve is refused.
 */
function platformOfReview(deps: ReviewActionDeps, row: ReviewRow): PlatformClient {
  if (!deps.merchants) return deps.platform;
  const own = deps.merchants.byNo(row.merchantNo);
  if (own) return own.platform;
  if (!deps.merchants.several) return deps.platform;
  throw new AppError(
    ErrorCodes.REQUEST_INVALID,
    `review ${row.id} is of merchant number ${row.merchantNo}, which this console does not serve (MERCHANTS_FILE)`,
    { details: { reviewId: row.id } },
  );
}

/** What re-verifying did: credited/finalised now, applied before, or still failing (the review stays open). */
export type ReverifyOutcome = 'applied' | 'duplicate' | 'review';

const target = (id: number) => `review:${id}`;

/** The merchant a review is of (what the action layer checks scope against); null for no such review. */
async function merchantOfReview(db: Database, id: number): Promise<string | null> {
  const [row] = await db.select({ merchantNo: reviews.merchantNo }).from(reviews).where(eq(reviews.id, id));
  return row?.merchantNo ?? null;
}

function notOpen(row: ReviewRow): AppError {
  return new AppError(ErrorCodes.REVIEW_NOT_OPEN, `review ${row.id} is already ${row.status}`, {
    details: { reviewId: row.id, status: row.status },
  });
}

/**
 * Re-verify a review now (role operator, a reason): settlement's reverifyReview asks Get order and applies the first
 * of the review's events it confirms, through the worker's commit (source "review", no waiting), which credits or
 * finalises once and resolves the review in its crediting transaction only when Get order confirms every event of
 * it. Each re-verify is added to the review's history as an attempt; the review's reason (the original finding) is
 * never rewritten, and a review holding an event Get order does not confirm is never closed as applied.
 */
export async function reverify(
  deps: ReviewActionDeps,
  actor: Actor,
  id: number,
  reason: unknown,
): Promise<{ outcome: ReverifyOutcome; review: ReviewView }> {
  const merchant = await merchantOfReview(deps.db, id);
  const spec = { action: 'reviews.reverify', target: target(id), reason, merchant } as const;
  return performExternalAction(deps, actor, spec, async () => {
    const row = await findReviewRow(deps.db, id);
    if (row.status !== 'open') throw notOpen(row);
    const platform = platformOfReview(deps, row);
    const applied = await reverifyReview({ db: deps.db, platform, logger: deps.logger }, row.id);
    const outcome: ReverifyOutcome =
      applied.status === 'applied' || applied.status === 'duplicate' ? applied.status : 'review';
    return {
      result: outcome,
      outcome,
      details: { orderNo: row.orderNo, state: row.state, merchantOrderNo: row.merchantOrderNo },
    };
  }).then(async (outcome) => ({ outcome, review: await getReview(deps.db, id) }));
}

/**
 * Close an open review without applying its event (role operator, a reason); the note (else the reason) stays on it.
 * The note is checked as a reason is (after the role): no control characters but line breaks, no bidi overrides.
 */
export async function dismiss(
  deps: ReviewActionDeps,
  actor: Actor,
  id: number,
  reason: unknown,
  note?: string,
): Promise<ReviewView> {
  const merchant = await merchantOfReview(deps.db, id);
  const auth = await authorize(deps, actor, { action: 'reviews.dismiss', target: target(id), reason, merchant });
  if (note !== undefined) requirePlainText('note', note);
  return commitAction(deps, auth, async (tx) => {
    const text = (note?.trim() || (typeof reason === 'string' ? reason.trim() : '')).slice(0, 2000);
    const [closed] = await tx
      .update(reviews)
      .set({
        status: 'dismissed',
        note: text,
        closedBy: actor.operator.name,
        closedAt: sql`now()`,
        updatedAt: sql`now()`,
      })
      .where(and(eq(reviews.id, id), eq(reviews.status, 'open')))
      .returning();
    if (!closed) throw notOpen(await findReviewRow(tx, id));
    const [shown] = await reviewViews(tx, [closed]);
    return {
      result: shown!,
      outcome: 'dismissed',
      details: { orderNo: closed.orderNo, state: closed.state, merchantOrderNo: closed.merchantOrderNo },
    };
  });
}
