import type { Database } from '@mcb/core/db';
import { reviews } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { PlatformClient } from '@mcb/core/platform';
import { callbackJobSchema } from '@mcb/core/queue';
import { applyEvent } from '@mcb/settlement';
import { and, desc, eq, lt, sql } from 'drizzle-orm';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '../schemas.ts';

/** What the reviews routes need: re-verify calls the worker's applyEvent with the console's own clients. */
export interface ReviewsDeps {
  db: Database;
  platform: PlatformClient;
  logger: Logger;
}

const reviewSchema = z.object({
  id: z.number().int(),
  kind: z.enum(['payin', 'payout']),
  orderNo: z.string().describe("The platform's OrderNo"),
  state: z.number().int(),
  merchantOrderNo: z.string(),
  reasonCode: z.string().describe('A code from docs/errors.md'),
  reason: z.string(),
  details: z.record(z.string(), z.unknown()).nullable().describe('What was compared (states, amounts, waited time)'),
  status: z.enum(['open', 'resolved', 'dismissed']),
  occurrences: z.number().int().describe('How many times the event landed here while open'),
  note: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  closedAt: z.string().nullable(),
});

type ReviewRow = typeof reviews.$inferSelect;
const view = (r: ReviewRow): z.output<typeof reviewSchema> => ({
  id: r.id,
  kind: r.kind,
  orderNo: r.orderNo,
  state: r.state,
  merchantOrderNo: r.merchantOrderNo,
  reasonCode: r.reasonCode,
  reason: r.reason,
  details: r.details ?? null,
  status: r.status,
  occurrences: r.occurrences,
  note: r.note,
  createdAt: r.createdAt.toISOString(),
  updatedAt: r.updatedAt.toISOString(),
  closedAt: r.closedAt?.toISOString() ?? null,
});

const idParams = z.object({ id: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER) });

async function findReview(db: Database, id: number): Promise<ReviewRow> {
  const [row] = await db.select().from(reviews).where(eq(reviews.id, id));
  if (!row) throw new AppError(ErrorCodes.NOT_FOUND, `no review ${id}`, { details: { reviewId: id } });
  return row;
}

function notOpen(row: ReviewRow): AppError {
  return new AppError(ErrorCodes.REVIEW_NOT_OPEN, `review ${row.id} is already ${row.status}`, { details: { reviewId: row.id, status: row.status } });
}

/**
 * Reviews: events that failed verification. List them with their reasons; re-verify one now (through applyEvent,
 * the same transactional path as a callback job, which closes the review as resolved in the crediting
 * transaction), or dismiss it with a note.
 */
export const reviewsRoutes: FastifyPluginAsyncZod<ReviewsDeps> = async (app, deps) => {
  const { db } = deps;

  app.get(
    '/api/reviews',
    {
      schema: {
        summary: 'Reviews, newest first',
        description: 'Events that failed verification, with reasons. Page with `before` (the last id seen).',
        tags: ['reviews'],
        querystring: z.strictObject({
          status: z.enum(['open', 'resolved', 'dismissed']).optional(),
          merchantOrderNo: z.string().min(1).max(64).optional(),
          before: z.coerce.number().int().positive().optional().describe('Only reviews with a smaller id'),
          limit: z.coerce.number().int().min(1).max(500).default(100),
        }),
        response: { 200: z.object({ reviews: z.array(reviewSchema) }), 400: errorBodySchema },
      },
    },
    async (req) => {
      const q = req.query;
      const rows = await db
        .select()
        .from(reviews)
        .where(
          and(
            q.status ? eq(reviews.status, q.status) : undefined,
            q.merchantOrderNo ? eq(reviews.merchantOrderNo, q.merchantOrderNo) : undefined,
            q.before ? lt(reviews.id, q.before) : undefined,
          ),
        )
        .orderBy(desc(reviews.id))
        .limit(q.limit);
      return { reviews: rows.map(view) };
    },
  );

  app.post(
    '/api/reviews/:id/reverify',
    {
      schema: {
        summary: 'Re-verify a review now',
        description:
          'Runs the event through the worker\'s applyEvent (source "review", no waiting): Get order is asked now; if it confirms, the order is credited or finalised once and the review is resolved in the same transaction. Otherwise the review stays open with the new reason.',
        tags: ['reviews'],
        params: idParams,
        response: {
          200: z.object({
            outcome: z.enum(['applied', 'duplicate', 'review']).describe('applied: credited/finalised now; duplicate: applied before; review: still failing'),
            review: reviewSchema,
          }),
          400: errorBodySchema,
          404: errorBodySchema,
          409: errorBodySchema.describe('The review is not open'),
          503: errorBodySchema.describe('The platform or the database is unreachable; nothing changed'),
        },
      },
    },
    async (req) => {
      const row = await findReview(db, req.params.id);
      if (row.status !== 'open') throw notOpen(row);
      const parsed = callbackJobSchema.safeParse({ ...row.event, source: 'review' });
      if (!parsed.success) {
        throw new AppError(ErrorCodes.REQUEST_INVALID, `review ${row.id} holds no event that can be re-verified; dismiss it`, {
          details: { reviewId: row.id },
        });
      }
      const outcome = await applyEvent(parsed.data, { db, platform: deps.platform, logger: deps.logger }, { noWait: true });
      if (outcome.status === 'duplicate') {
        // Applied before (by a callback, a sweep or another re-verify): nothing is left to decide.
        await db
          .update(reviews)
          .set({ status: 'resolved', closedAt: sql`now()`, updatedAt: sql`now()`, note: sql`coalesce(${reviews.note}, 'already applied')` })
          .where(and(eq(reviews.id, row.id), eq(reviews.status, 'open')));
      }
      const after = await findReview(db, row.id);
      req.log.info({ reviewId: row.id, orderNo: row.orderNo, state: row.state, merchantOrderNo: row.merchantOrderNo, outcome: outcome.status }, 'review re-verified');
      const status: 'applied' | 'duplicate' | 'review' = outcome.status === 'applied' || outcome.status === 'duplicate' ? outcome.status : 'review';
      return { outcome: status, review: view(after) };
    },
  );

  app.post(
    '/api/reviews/:id/dismiss',
    {
      schema: {
        summary: 'Dismiss a review with a note',
        description: 'Closes an open review without applying its event (for example a forged callback). The note says why.',
        tags: ['reviews'],
        params: idParams,
        body: z.strictObject({ note: z.string().trim().min(1, 'required').max(2000) }),
        response: { 200: z.object({ review: reviewSchema }), 400: errorBodySchema, 404: errorBodySchema, 409: errorBodySchema },
      },
    },
    async (req) => {
      const [closed] = await db
        .update(reviews)
        .set({ status: 'dismissed', note: req.body.note, closedAt: sql`now()`, updatedAt: sql`now()` })
        .where(and(eq(reviews.id, req.params.id), eq(reviews.status, 'open')))
        .returning();
      if (!closed) throw notOpen(await findReview(db, req.params.id));
      req.log.info({ reviewId: closed.id, orderNo: closed.orderNo, state: closed.state, merchantOrderNo: closed.merchantOrderNo }, 'review dismissed');
      return { review: view(closed) };
    },
  );
};
