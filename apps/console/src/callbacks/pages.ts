/**
 * `/callbacks` (the list, its presets, filter and counts) and `POST /callbacks/run-now`. The same query as
 * `GET /api/callbacks`; the run-now form calls the same action as every other way in (runNow: role, reason, audit).
 */
import type { Database } from '@mcb/core/db';
import { isAppError } from '@mcb/core/errors';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync } from 'fastify';
import type { Logger } from '@mcb/core/logger';
import { actorOf } from '../operators/operator.ts';
import { safeNext } from '../session/pages.ts';
import { formAction } from '../web/forms.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { codesOf, countMatching, waitingCounts } from './counts.ts';
import { filterOfForm, formValues } from './form.ts';
import { filterWhere, hasFilter, listOf, searchCallbacks, type CallbackFilter } from './queries.ts';
import { runNow } from './run-now.ts';
import { callbacksPage } from './views.ts';

export interface CallbacksPagesDeps {
  db: Database;
  logger: Logger;
  /** The callbacks queue: "run now" needs it. @defaultValue none (no run-now form) */
  queue?: Queue;
}

export const callbacksPages: FastifyPluginAsync<CallbacksPagesDeps> = async (app, deps) => {
  app.get('/callbacks', { schema: { hide: true } }, async (req, reply) => {
    const query = (req.query ?? {}) as Record<string, unknown>;
    const values = formValues(query);
    let filter: CallbackFilter = {};
    let flash = flashOf(query);
    try {
      filter = filterOfForm(query);
    } catch (e) {
      if (!isAppError(e)) throw e;
      flash = { kind: 'error', text: e.message };
    }
    const cursor = typeof query.cursor === 'string' && query.cursor ? query.cursor.slice(0, 200) : undefined;
    const listing = hasFilter(filter);
    const [counts, codes, page, matched] = await Promise.all([
      waitingCounts(deps.db),
      codesOf(deps.db, listOf(filter.status)),
      listing ? searchCallbacks(deps.db, filter, { cursor, limit: 50 }) : undefined,
      listing ? countMatching(deps.db, filterWhere(filter)) : undefined,
    ]);
    const vm = { filter, values, page, matched, counts, codes, viewer: req.operator!, self: req.url };
    return sendPage(
      req,
      reply,
      { title: 'Callbacks', area: 'callbacks', flash },
      callbacksPage(vm),
      flash?.kind === 'error' && !flashOf(query) ? 400 : 200,
    );
  });

  app.post('/callbacks/run-now', { schema: { hide: true } }, async (req, reply) => {
    const form = (req.body ?? {}) as Record<string, unknown>;
    const back = safeNext(typeof form.back === 'string' ? form.back : '/callbacks');
    return formAction(reply, back, async () => {
      if (!deps.queue) throw new Error('run now needs the callbacks queue');
      const r = await runNow(
        { db: deps.db, logger: deps.logger, queue: deps.queue },
        actorOf(req),
        filterOfForm(form),
        form.reason,
      );
      return `${r.promoted} job(s) run now${r.skipped > 0 ? `; ${r.skipped} no longer waiting (running or done)` : ''}${r.more ? '; more match: run it again' : ''}.`;
    });
  });
};
