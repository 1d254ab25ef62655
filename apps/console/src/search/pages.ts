import type { Db } from '@mcb/core/db';
import type { FastifyRequest } from 'fastify';
import type { FleetState } from '@mcb/core/platform';
import type { Queue } from 'bullmq';
import { orderHref } from '../web/format.ts';
import { pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { findByNumber, waiting } from './queries.ts';
import { searchPage } from './views.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import type { Html } from '../web/html.ts';

/** What the search page needs. */
export interface SearchPagesDeps {
  db: Db;
  queue?: Queue;
  /** The merchant a console served before merchants were named (RouteDeps.merchantNo). */
  merchantNo: string;
  /** The merchants whose orders it finds (each merchant's, by number). */
  merchants: ConsoleMerchants;
  /** The fleet's Get order state (throttled, breaker open), from Redis. @defaultValue none (not shown) */
  platformState?: () => Promise<FleetState>;
  /** The merchants that need a person, a line each (merchants/views.ts). @defaultValue none (not shown) */
  merchantsAttention?: (req: FastifyRequest) => Promise<Html | ''>;
}

/** `/` opens the search; `/search?q=`: an order's number takes you to its page; anything else is shown here. */
export function searchPageRows({
  db,
  queue,
  platformState,
  merchants,
  merchantsAttention,
}: SearchPagesDeps): RouteRow[] {
  return [
    pageRoute({
      url: '/',
      action: 'read',
      handler: async (_req, reply) => reply.code(302).header('location', '/search').send(),
    }),

    pageRoute({
      url: '/search',
      action: 'read',
      handler: async (req, reply) => {
        const q = (req.query as Record<string, unknown>).q;
        const query = typeof q === 'string' ? q.slice(0, 200) : '';
        if (!query.trim()) {
          // The fleet's Get order state in Redis; the page does without it when Redis is away.
          const [platform, attention] = await Promise.all([
            platformState?.().catch(() => undefined),
            merchantsAttention?.(req),
          ]);
          return sendPage(
            req,
            reply,
            { title: 'Search', area: 'search', flash: flashOf(req.query) },
            searchPage('', undefined, await waiting(db, queue), platform, attention),
          );
        }
        const found = await findByNumber(db, queue, query, merchants);
        if (found.kind === 'order') {
          const named = found.merchant ? `?merchant=${encodeURIComponent(found.merchant)}` : '';
          return reply
            .code(303)
            .header('location', orderHref(found.merchantOrderNo) + named)
            .send();
        }
        return sendPage(req, reply, { title: `Search: ${query}`, area: 'search' }, searchPage(query, found));
      },
    }),
  ];
}
