import { orderEvents, type Database } from '@mcb/core/db';
import { and, asc, gt, inArray, sql } from 'drizzle-orm';
import { merchantRefSchema } from '../orders/schemas.ts';
import { listScopeOf, type ListScope } from '../operators/scope.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import { z } from 'zod';
import { errorBodySchema } from '../web/api-schemas.ts';
import { route, type RouteRow } from '../web/route-table.ts';

/** Options of {@link eventsRoutes}. */
export interface EventsDeps {
  db: Database;
  /**
   * How long a hole in the ids may stay before the feed steps over it, in ms. A hole is an id taken by a
   * transaction that has not committed yet (it will appear) or that rolled back (it never will).
   * @defaultValue 10000
   */
  gapGraceMs?: number;
  /** The console's merchants: `?merchant=` and operators' scopes. @defaultValue none (every event) */
  merchants?: ConsoleMerchants;
}

const eventSchema = z.object({
  id: z.string().describe('The event id; pass the last one seen as `after`'),
  type: z.string().describe('payin.credited, payout.succeeded, payout.refused'),
  merchantOrderNo: z.string(),
  merchant: z.string().optional().describe("The merchant's ref (only when the console serves two or more)"),
  payload: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
});

const cursorSchema = z
  .string()
  .regex(/^\d{1,18}$/, 'expected the nextCursor of a previous answer (digits)')
  .default('0')
  .describe('Return events after this cursor; omit to start from the beginning');

/**
 * Walk rows in id order and keep the contiguous run after `after`. Ids come from a sequence taken before commit,
 * so a transaction can commit a smaller id after a reader has seen a larger one; a reader that jumped that hole
 * would never see the event. So the feed stops before a hole, unless the row after it is older than the grace
 * period (then the hole is an aborted transaction, not a late one) and steps over it. Ages are measured by
 * Postgres's clock (`now() - created_at`), so the console's clock does not matter.
 */
export function contiguousPrefix<T extends { id: number; ageMs: number }>(
  rows: T[],
  after: number,
  graceMs: number,
): T[] {
  const out: T[] = [];
  let expected = after + 1;
  for (const row of rows) {
    if (row.id !== expected && row.ageMs < graceMs) break;
    out.push(row);
    expected = row.id + 1;
  }
  return out;
}

/** `GET /api/events?after=&limit=`: the outbox of order changes, in order, resumable from `nextCursor`. */
export function eventsRows(deps: EventsDeps): RouteRow[] {
  const graceMs = deps.gapGraceMs ?? 10_000;
  return [
    route({
      method: 'GET',
      url: '/api/events',
      action: 'read',
      schema: {
        summary: 'The outbox feed of order changes',
        description:
          'Events in commit-safe id order. Resume with `after=nextCursor`; an empty page means nothing new ' +
          'yet (poll again). Each event is delivered once per cursor walk; consumers deduplicate by id.',
        tags: ['events'],
        querystring: z.strictObject({
          after: cursorSchema,
          limit: z.coerce.number().int().min(1).max(1000).default(100),
          merchant: merchantRefSchema
            .optional()
            .describe("Only this merchant's events (a ref); unknown or outside your merchants: 400"),
        }),
        response: {
          200: z.object({ events: z.array(eventSchema), nextCursor: z.string().describe('Pass as `after` next time') }),
          400: errorBodySchema,
        },
      },
      handler: async (req) => {
        const after = Number(req.query.after);
        const scope = listScopeOf(req.operator!, deps.merchants, req.query.merchant);
        if (scope.merchantNos) return merchantFeed(deps.db, after, req.query.limit, graceMs, scope);
        const rows = await deps.db
          .select({
            id: orderEvents.id,
            eventType: orderEvents.eventType,
            merchantOrderNo: orderEvents.merchantOrderNo,
            merchantNo: orderEvents.merchantNo,
            payload: orderEvents.payload,
            createdAt: orderEvents.createdAt,
            ageMs: sql<number>`(extract(epoch from (now() - ${orderEvents.createdAt})) * 1000)::float8`.mapWith(Number),
          })
          .from(orderEvents)
          .where(gt(orderEvents.id, after))
          .orderBy(asc(orderEvents.id))
          .limit(req.query.limit);
        const ready = contiguousPrefix(rows, after, graceMs);
        return {
          events: ready.map((e) => ({
            id: String(e.id),
            type: e.eventType,
            merchantOrderNo: e.merchantOrderNo,
            ...(scope.refOf ? { merchant: scope.refOf(e.merchantNo) } : {}),
            payload: e.payload,
            createdAt: e.createdAt.toISOString(),
          })),
          nextCursor: String(ready.at(-1)?.id ?? after),
        };
      },
    }),
  ];
}

/**
 * The feed of some merchants' events (`?merchant=`, or an operator's scope), read through order_events_merchant_id_idx.
 * Their ids are not contiguous (the other merchants' lie between), so a hole is judged over every merchant's ids: the
 * page stops before the first id in its range that no committed row holds and whose next row is younger than the
 * grace period (a transaction that may still commit), as the unfiltered feed does.
 */
async function merchantFeed(db: Database, after: number, limit: number, graceMs: number, scope: ListScope) {
  const nos = [...(scope.merchantNos ?? [])];
  const rows = await db
    .select({
      id: orderEvents.id,
      eventType: orderEvents.eventType,
      merchantOrderNo: orderEvents.merchantOrderNo,
      merchantNo: orderEvents.merchantNo,
      payload: orderEvents.payload,
      createdAt: orderEvents.createdAt,
    })
    .from(orderEvents)
    .where(and(inArray(orderEvents.merchantNo, nos), gt(orderEvents.id, after)))
    .orderBy(asc(orderEvents.id))
    .limit(limit);
  const top = rows.at(-1)?.id;
  let ready = rows;
  if (top !== undefined) {
    // The holes first (ids no committed row holds: rare), then the age of the row after each (per hole, not per id).
    const { rows: holes } = await db.execute<{ hole: string }>(sql`
      with holes as materialized (
        select h.hole
          from (select ${after}::bigint + 1 as hole
                union all
                select e.id + 1 from ${orderEvents} e where e.id > ${after} and e.id < ${top}) h
         where h.hole <= ${top}
           and not exists (select 1 from ${orderEvents} x where x.id = h.hole))
      select hole::text as hole
        from holes
       where coalesce((select extract(epoch from (now() - n.created_at)) * 1000
                         from ${orderEvents} n where n.id > holes.hole order by n.id limit 1), 0) < ${graceMs}
       order by hole
       limit 1`);
    const hole = holes[0] ? Number(holes[0].hole) : undefined;
    if (hole !== undefined) ready = rows.filter((r) => r.id < hole);
  }
  return {
    events: ready.map((e) => ({
      id: String(e.id),
      type: e.eventType,
      merchantOrderNo: e.merchantOrderNo,
      ...(scope.refOf ? { merchant: scope.refOf(e.merchantNo) } : {}),
      payload: e.payload,
      createdAt: e.createdAt.toISOString(),
    })),
    nextCursor: String(ready.at(-1)?.id ?? after),
  };
}
