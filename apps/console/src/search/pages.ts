import type { Db } from '@mcb/core/db';
import type { FleetState } from '@mcb/core/platform';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync } from 'fastify';
import { orderHref } from '../web/format.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { findByNumber, waiting } from './queries.ts';
import { searchPage } from './views.ts';

/** `/search?q=`: an order's number takes you to its page; anything else is shown here. */
export const searchPages: FastifyPluginAsync<{
  db: Db;
  queue?: Queue;
  platformState?: () => Promise<FleetState>;
}> = async (app, { db, queue, platformState }) => {
  app.get('/search', { schema: { hide: true } }, async (req, reply) => {
    const q = (req.query as Record<string, unknown>).q;
    const query = typeof q === 'string' ? q.slice(0, 200) : '';
    if (!query.trim()) {
      // The fleet's Get order state (throttled, breaker open) in Redis; the page does without it when Redis is away.
      const platform = await platformState?.().catch(() => undefined);
      return sendPage(
        req,
        reply,
        { title: 'Search', area: 'search', flash: flashOf(req.query) },
        searchPage('', undefined, await waiting(db), platform),
      );
    }
    const found = await findByNumber(db, queue, query);
    if (found.kind === 'order') return reply.code(303).header('location', orderHref(found.merchantOrderNo)).send();
    return sendPage(req, reply, { title: `Search: ${query}`, area: 'search' }, searchPage(query, found));
  });
};
