import { reviews, type Database } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { and, desc, eq, inArray, lt } from 'drizzle-orm';
import { merchantRefSchema } from '../orders/schemas.ts';
import { z } from 'zod';
import { can, type Role } from '../operators/roles.ts';
import { iso } from '../web/format.ts';
import { reviewStory } from './words.ts';
import {
  loadReviewHistory,
  reviewAttemptSchema,
  reviewEventSchema,
  type ReviewAttemptView,
  type ReviewEventView,
} from './history.ts';

type ReviewHistory = { events: Map<number, ReviewEventView[]>; attempts: Map<number, ReviewAttemptView[]> };

/**
 * A review as the API and the pages show it. Never the event itself (it holds the decrypted callback): its order
 * numbers, state and the compared values in `details` are what an operator needs to judge it.
 */
export const reviewViewSchema = z.object({
  id: z.number().int(),
  kind: z.enum(['payin', 'payout']),
  orderNo: z.string().describe("The platform's OrderNo"),
  state: z.number().int(),
  merchantOrderNo: z.string(),
  merchant: z.string().optional().describe("The merchant's ref (only when the console serves two or more)"),
  reasonCode: z.string().describe('A code from docs/errors.md: the original finding, never rewritten'),
  reason: z.string(),
  details: z.record(z.string(), z.unknown()).nullable().describe('What was compared (states, amounts, waited time)'),
  status: z.enum(['open', 'resolved', 'dismissed']),
  occurrences: z.number().int().describe('How many times an event of the pair landed here while open'),
  events: z
    .array(reviewEventSchema)
    .describe('Each distinct event of the pair that landed here (a forged one and the genuine one are two)'),
  attempts: z.array(reviewAttemptSchema).describe('Re-verifies and commits of the pair since it opened, oldest first'),
  note: z.string().nullable(),
  story: z
    .object({
      suspectedForgery: z
        .boolean()
        .describe('Its code says a callback claimed what Get order or a receipt contradicts'),
      happened: z.string().describe('What happened, in words'),
      nextStep: z.string().describe('What to do next (for a suspected forgery: the key rotation)'),
      command: z.string().nullable().describe('The command the next step starts with, if any'),
    })
    .describe('The review in words for a person (reviews/words.ts, reviewStory)'),
  closedBy: z.string().nullable().describe('Who dismissed it (null while open, and when the worker resolved it)'),
  createdAt: z.string(),
  updatedAt: z.string(),
  closedAt: z.string().nullable(),
});

export type ReviewView = z.output<typeof reviewViewSchema>;

/** A review in a list beside other records (`GET /api/callbacks`): the view's own fields, without its history. */
export const reviewSummarySchema = reviewViewSchema.pick({
  id: true,
  orderNo: true,
  state: true,
  merchantOrderNo: true,
  reasonCode: true,
  reason: true,
  status: true,
  occurrences: true,
  createdAt: true,
  closedAt: true,
});
export type ReviewSummary = z.output<typeof reviewSummarySchema>;
export type ReviewRow = typeof reviews.$inferSelect;

/** The filter of the inbox and `GET /api/reviews`. */
export const reviewFilterSchema = z.strictObject({
  status: z.enum(['open', 'resolved', 'dismissed']).optional(),
  merchantOrderNo: z.string().min(1).max(64).optional(),
  merchant: merchantRefSchema
    .optional()
    .describe("Only this merchant's (a ref); unknown or outside your merchants: 400. Unset: every merchant you see"),
  before: z.coerce.number().int().positive().optional().describe('Only reviews with a smaller id (the last id seen)'),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});
export type ReviewFilter = z.output<typeof reviewFilterSchema>;

export const reviewListSchema = z.object({
  reviews: z.array(reviewViewSchema),
  nextBefore: z.number().int().nullable().describe('Pass as `before` for the next page; null on the last'),
});
export type ReviewList = z.output<typeof reviewListSchema>;

/**
 * Row to view, with its history (distinct events and attempts); fields a later schema may add or rename are read
 * defensively.
 */
export function reviewView(
  r: ReviewRow,
  history: ReviewHistory = { events: new Map(), attempts: new Map() },
): ReviewView {
  const details = r.details && typeof r.details === 'object' && !Array.isArray(r.details) ? r.details : null;
  const attempts = history.attempts.get(r.id) ?? [];
  const createdAt = iso(r.createdAt) ?? '';
  return {
    id: r.id,
    kind: r.kind,
    orderNo: r.orderNo,
    state: r.state,
    merchantOrderNo: r.merchantOrderNo,
    reasonCode: r.reasonCode,
    reason: r.reason,
    details,
    status: r.status,
    occurrences: typeof r.occurrences === 'number' ? r.occurrences : 1,
    events: history.events.get(r.id) ?? [],
    attempts,
    note: r.note ?? null,
    story: reviewStory({ ...r, details, createdAt, attempts, events: history.events.get(r.id) ?? [] }),
    closedBy: r.closedBy ?? null,
    createdAt,
    updatedAt: iso(r.updatedAt) ?? iso(r.createdAt) ?? '',
    closedAt: iso(r.closedAt),
  };
}

/** The {@link reviewSummarySchema} of a review: its view, less what a list beside other records leaves out. */
export const reviewSummary = (r: ReviewRow): ReviewSummary => reviewSummarySchema.parse(reviewView(r));

/** Reviews as the API and pages show them, each with its distinct events and its history (two more queries). */
export async function reviewViews(db: Database, rows: readonly ReviewRow[]): Promise<ReviewView[]> {
  const history = await loadReviewHistory(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => reviewView(r, history));
}

/**
 * A review as `role` may see it. The stored event (the decrypted callback) never leaves the server whole; each
 * distinct event's fields an operator judges a review by (merchant number, amount, quantity, pay time) go to those
 * who may act on it (operator, admin). A viewer sees its order numbers, state, hash and what verification found.
 */
export function reviewForRole(view: ReviewView, role: Role): ReviewView {
  if (can(role, 'reviews.reverify')) return view;
  return {
    ...view,
    events: view.events.map((e) => ({ ...e, merchantNo: null, fiatAmount: null, quantity: null, payTime: null })),
  };
}

/** Reviews, newest first, one page, as `role` may see them ({@link reviewForRole}). */
/** Reviews by `f`, newest first; `merchantNo` keeps them to that merchant's (several merchants). */
export async function listReviews(
  db: Database,
  f: ReviewFilter,
  role: Role,
  merchantNo?: string | readonly string[],
  refOf?: (merchantNo: string) => string | undefined,
): Promise<ReviewList> {
  const nos = typeof merchantNo === 'string' ? [merchantNo] : merchantNo;
  const rows = await db
    .select()
    .from(reviews)
    .where(
      and(
        f.status ? eq(reviews.status, f.status) : undefined,
        f.merchantOrderNo ? eq(reviews.merchantOrderNo, f.merchantOrderNo) : undefined,
        nos ? inArray(reviews.merchantNo, [...nos]) : undefined,
        f.before ? lt(reviews.id, f.before) : undefined,
      ),
    )
    .orderBy(desc(reviews.id))
    .limit(f.limit + 1);
  const page = rows.slice(0, f.limit);
  return {
    reviews: (await reviewViews(db, page)).map((v, i) => {
      const ref = refOf?.(page[i]!.merchantNo);
      return reviewForRole(ref ? { ...v, merchant: ref } : v, role);
    }),
    nextBefore: rows.length > f.limit ? page[page.length - 1]!.id : null,
  };
}

export async function findReviewRow(db: Database, id: number): Promise<ReviewRow> {
  const [row] = await db.select().from(reviews).where(eq(reviews.id, id));
  if (!row) throw new AppError(ErrorCodes.NOT_FOUND, `no review ${id}`, { details: { reviewId: id } });
  return row;
}

export async function getReview(db: Database, id: number): Promise<ReviewView> {
  const [view] = await reviewViews(db, [await findReviewRow(db, id)]);
  return view!;
}
