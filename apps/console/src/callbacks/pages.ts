/**
 * `/callbacks` (the list, its presets, filter and counts) and `POST /callbacks/run-now`. The same query as
 * `GET /api/callbacks`; the run-now form calls the same action as every other way in (runNow: role, reason, audit).
 */
import type { Database } from '@mcb/core/db';
import { ErrorCodes, isAppError, isRefusal } from '@mcb/core/errors';
import type { FleetState } from '@mcb/core/platform';
import type { MerchantQueues } from './merchant-queues.ts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '@mcb/core/logger';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { safeNext } from '../session/pages.ts';
import { formRoute, pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { codesOf, countMatching, waitingCounts } from './counts.ts';
import { listScopeOf, visibleMerchantNos, type ListScope } from '../operators/scope.ts';
import { merchantChoices } from '../web/merchant-field.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import { filterOfForm, formValues, formWithFilter } from './form.ts';
import { filterWhere, hasFilter, listOf, searchCallbacks, type CallbackFilter } from './queries.ts';
import { runNow, runNowTarget } from './run-now.ts';
import { callbacksPage } from './views.ts';

export interface CallbacksPagesDeps {
  db: Database;
  logger: Logger;
  /** Every merchant's callbacks queue: "run now" needs them. @defaultValue none (no run-now form) */
  queues?: MerchantQueues;
  /** The fleet's Get order state, from Redis: "run now" runs nothing while the breaker holds the jobs. */
  platformState?: () => Promise<FleetState>;
  /** The console's merchants: the merchant field and column (two or more), and operators' scopes. */
  merchants?: ConsoleMerchants;
}

/** What comes back to the page as a flash line: our refusals (not a role's 403), and the breaker holding the jobs. */
const refusedOnThePage = (e: unknown) =>
  isAppError(e) &&
  (e.code === ErrorCodes.PLATFORM_CIRCUIT_OPEN || (e.code !== ErrorCodes.FORBIDDEN && isRefusal(e.code)));

/** The run-now form: the filter's fields, the reason, and the page it was posted from. */
const runNowForm = formWithFilter({ reason: z.string().optional(), back: z.string().optional() });

/** The audit target of a refused "run now", from the form as posted. */
function runNowTargetOf(req: FastifyRequest): string {
  try {
    return runNowTarget(filterOfForm((req.body ?? {}) as Record<string, unknown>));
  } catch {
    return 'callbacks:(invalid filter)';
  }
}

export function callbacksPageRows(deps: CallbacksPagesDeps): RouteRow[] {
  return [
    pageRoute({ url: '/callbacks', action: 'read', handler: (req, reply) => callbacksList(deps, req, reply) }),

    formRoute({
      url: '/callbacks/run-now',
      action: 'queue.promote',
      target: runNowTargetOf,
      form: runNowForm,
      back: (req) => safeNext((req.body as { back?: unknown } | undefined)?.back ?? '/callbacks'),
      refused: refusedOnThePage,
      run: async (req, { form }) => {
        if (!deps.queues) throw new Error('run now needs the callbacks queue');
        const state = deps.platformState;
        const breakerOpen = state && (async () => (await state().catch(() => undefined))?.breakerOpen === true);
        const r = await runNow(
          { db: deps.db, logger: deps.logger, queues: deps.queues, breakerOpen },
          actorOf(req),
          form.filter,
          form.reason,
        );
        const skipped = r.skipped > 0 ? `; ${r.skipped} no longer waiting (running or done)` : '';
        return `${r.promoted} job(s) run now${skipped}${r.more ? '; more match: run it again' : ''}.`;
      },
    }),
  ];
}

/** The list: counts, the filter form, and the page of callbacks that match (an invalid filter says why, 400). */
async function callbacksList(deps: CallbacksPagesDeps, req: FastifyRequest, reply: FastifyReply) {
  const query = (req.query ?? {}) as Record<string, unknown>;
  const values = formValues(query);
  let filter: CallbackFilter = {};
  let flash = flashOf(query);
  let scope: ListScope = { merchantNos: visibleMerchantNos(req.operator!) };
  try {
    filter = filterOfForm(query);
    // A ref outside the viewer's merchants reads as an unknown one (operators/scope.ts).
    scope = listScopeOf(req.operator!, deps.merchants, filter.merchant);
  } catch (e) {
    if (!isAppError(e)) throw e;
    flash = { kind: 'error', text: e.message };
    filter = {};
  }
  const cursor = typeof query.cursor === 'string' && query.cursor ? query.cursor.slice(0, 200) : undefined;
  const listing = hasFilter(filter);
  const scoped = { ...filter, merchantNos: scope.merchantNos };
  const [counts, codes, page, matched] = await Promise.all([
    waitingCounts(deps.db, scope.merchantNos),
    codesOf(deps.db, listOf(filter.status), scope.merchantNos),
    listing ? searchCallbacks(deps.db, scoped, { cursor, limit: 50 }) : undefined,
    listing ? countMatching(deps.db, filterWhere(scoped)) : undefined,
  ]);
  const refs = merchantChoices(req.operator!, deps.merchants);
  const merchants = refs && scope.refOf ? { refs, refOf: scope.refOf } : undefined;
  const vm = { filter, values, page, matched, counts, codes, viewer: req.operator!, self: req.url, merchants };
  return sendPage(
    req,
    reply,
    { title: 'Callbacks', area: 'callbacks', flash },
    callbacksPage(vm),
    flash?.kind === 'error' && !flashOf(query) ? 400 : 200,
  );
}
