import type { Db } from '@mcb/core/db';
import type { FastifyRequest } from 'fastify';
import type { FleetState } from '@mcb/core/platform';
import type { Queue } from 'bullmq';
import { orderHref } from '../web/format.ts';
import { pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { findByNumber, waiting, type SearchScope } from './queries.ts';
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
  /** The callbacks queue of the merchant with this number (several merchants). @defaultValue `queue` */
  queueOf?: (merchantNo: string) => Queue | undefined;
  /** The fleet's Get order state (throttled, breaker open), from Redis. @defaultValue none (not shown) */
  platformState?: () => Promise<FleetState>;
  /** The merchants that need a person, a line each (merchants/views.ts). @defaultValue none (not shown) */
  merchantsAttention?: (req: FastifyRequest) => Promise<Html | ''>;
}

/** `/` opens the search; `/search?q=`: an order's number takes you to its page; anything else is shown here. */
export function searchPageRows({
  db,
  queue,
  queueOf,
  platformState,
  merchants,
  merchantsAttention,
}: SearchPagesDeps): RouteRow[] {
  const scopeOf = (req: FastifyRequest): SearchScope => ({
    reader: req.operator!,
    merchants,
    queueOf: (no) => queueOf?.(no) ?? (merchants.several ? undefined : queue),
  });
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
            searchPage('', undefined, await waiting(db, queue, scopeOf(req)), platform, attention),
          );
        }
        const found = await findByNumber(db, queue, query, merchants, scopeOf(req));
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
