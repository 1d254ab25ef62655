/**
 * The replay wizard's pages: /replays (list), /replays/new (filter, dry run, start form), /replays/{id} (progress,
 * cancel). They call the same actions and queries as the JSON API (STYLE 17) and ask `can` before rendering a
 * control (STYLE 18); a refused or invalid form comes back as a flash line on the same page.
 */
import { AppError, ErrorCodes, isAppError, isRefusal } from '@mcb/core/errors';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { FILTER_FIELDS, filterOfForm, filterParams, formValues, formWithFilter } from '../callbacks/form.ts';
import type { CallbackFilter } from '../callbacks/queries.ts';
import { actorOf } from '../operators/operator.ts';
import { can } from '../operators/roles.ts';
import { formRoute, pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { html } from '../web/html.ts';
import { merchantChoices } from '../web/merchant-field.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import { flashOf, sendPage } from '../web/send.ts';
import {
  cancelReplay,
  filterTarget,
  planReplayAction,
  replayRequestSchema,
  startReplay,
  type ReplayDeps,
} from './actions.ts';
import { getReplay, getVisibleReplay, listReplays, replayRefsFor, type ReplayView } from './queries.ts';
import { filterFormView, listView, planView, progressView } from './views.ts';

const idOf = (params: unknown): number => {
  const id = Number((params as { id?: string }).id);
  if (!Number.isSafeInteger(id) || id <= 0) throw new AppError(ErrorCodes.NOT_FOUND, 'no such replay');
  return id;
};

/** The dry run's address for a posted start form's filter fields (as typed, so a refusal shows them again). */
function backParams(form: Record<string, unknown>): URLSearchParams {
  try {
    return filterParams(filterOfForm(form), { dryRun: '1' });
  } catch {
    const q = new URLSearchParams({ dryRun: '1' });
    for (const k of FILTER_FIELDS) if (typeof form[k] === 'string' && form[k]) q.set(k, String(form[k]));
    return q;
  }
}

/** The start form: the filter's fields, the rate (blank: the default) and the reason. */
const startForm = formWithFilter({
  reason: z.string().optional(),
  // The dry run the form was shown with, as JSON (its bound, counts and totals): the start acts on its set only.
  plan: z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (!v) return undefined;
      const parsed = postedPlanSchema.safeParse(safeJson(v));
      if (!parsed.success) ctx.addIssue({ code: 'custom', message: 'the dry run posted back is not valid' });
      return parsed.data;
    }),
  ratePerSecond: z
    .string()
    .optional()
    .transform((v, ctx) => {
      const typed = v?.trim();
      if (!typed) return undefined;
      const rate = Number(typed);
      if (!Number.isInteger(rate))
        ctx.addIssue({ code: 'custom', message: 'jobs per second: expected a whole number' });
      return rate;
    }),
});
const postedPlanSchema = replayRequestSchema.shape.plan.unwrap();
const safeJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};
const reasonForm = z.object({ reason: z.string().optional() });
const formOf = (req: FastifyRequest) => (req.body ?? {}) as Record<string, unknown>;

/** The audit target of a refused start, from the form as posted (the start's own target: replays/actions.ts). */
function startTargetOf(req: FastifyRequest): string {
  try {
    return filterTarget(filterOfForm(formOf(req)));
  } catch {
    return 'replay:(invalid filter)';
  }
}

/** The replays' pages; `merchants` (two or more) gives the list its merchant field. */
export function replaysPageRows(deps: ReplayDeps, merchants?: ConsoleMerchants): RouteRow[] {
  return [
    pageRoute({
      url: '/replays',
      action: 'read',
      handler: async (req, reply) => {
        const query = (req.query as { merchant?: unknown }).merchant;
        const ref = typeof query === 'string' && query ? query : undefined;
        const refs = replayRefsFor(req.operator!, deps.queues, ref);
        const vm = {
          replays: await listReplays(deps.db, 50, refs),
          canPlan: can(req.operator!.role, 'replays.plan'),
          merchant: { refs: merchantChoices(req.operator!, merchants), chosen: ref },
        };
        return sendPage(req, reply, { title: 'Replays', area: 'replays', flash: flashOf(req.query) }, listView(vm));
      },
    }),

    // The wizard is for those who may dry-run (it asks Get order); a viewer is told which role it needs.
    pageRoute({ url: '/replays/new', action: 'replays.plan', handler: (req, reply) => wizard(deps, req, reply) }),

    formRoute({
      url: '/replays',
      action: 'replays.start',
      target: startTargetOf,
      form: startForm,
      back: (req) => `/replays/new?${backParams(formOf(req))}`,
      // Started: on to its progress page; refused: back to the dry run, with why.
      // A refusal (a 4xx of the error catalogue) is told on the dry-run page; a 403 (the role, or a merchant outside
      // the operator's scope) is the 403 page, as for every other form; anything else goes to the boundary.
      refused: (e) => isAppError(e) && e.code !== ErrorCodes.FORBIDDEN && isRefusal(e.code),
      run: async (req, { form: { filter, ratePerSecond, reason, plan } }) => {
        const replay = await startReplay(deps, actorOf(req), { filter, ratePerSecond, reason, plan });
        return {
          to: `/replays/${replay.id}`,
          text: `replay ${replay.id} started: ${replay.total} job(s) at ${replay.ratePerSecond} per second`,
        };
      },
    }),

    pageRoute({
      url: '/replays/:id',
      action: 'read',
      handler: async (req, reply) => {
        const replay = await getVisibleReplay(deps.db, deps.queues, req.operator!, idOf(req.params));
        const role = req.operator!.role;
        const canCancel = can(role, replay.operator === req.operator!.name ? 'replays.cancel' : 'replays.cancelOthers');
        const canPlan = can(role, 'replays.plan');
        return sendPage(
          req,
          reply,
          { title: `Replay ${replay.id}`, area: 'replays', flash: flashOf(req.query) },
          progressView({ replay, canCancel, canPlan }),
        );
      },
    }),

    formRoute({
      url: '/replays/:id/cancel',
      // Cancelling another operator's replay (replays.cancelOthers, admin) is checked by the action itself.
      action: 'replays.cancel',
      target: (req) => `replay:${String((req.params as { id?: unknown }).id ?? '')}`,
      form: reasonForm,
      back: (req) => `/replays/${idOf(req.params)}`,
      run: async (req, { form }) => {
        const id = idOf(req.params);
        const replay = await cancelReplay(deps, actorOf(req), id, form.reason);
        return `replay ${id} cancelled after ${replay.replayed} of ${replay.total} job(s)`;
      },
    }),
  ];
}

/** `/replays/new`: the filter form, and with `dryRun=1` the dry run of its filter and the start form. */
async function wizard(deps: ReplayDeps, req: FastifyRequest, reply: FastifyReply) {
  const query = (req.query ?? {}) as Record<string, unknown>;
  const form = filterFormView({ values: formValues(query) });
  const frame = { title: 'New replay', area: 'replays' as const, flash: flashOf(req.query) };
  if (query.dryRun !== '1') return sendPage(req, reply, frame, form);
  let filter: CallbackFilter;
  try {
    filter = filterOfForm(query);
  } catch (e) {
    return sendPage(req, reply, { ...frame, flash: { kind: 'error', text: (e as Error).message } }, form, 400);
  }
  const plan = await planReplayAction(deps, actorOf(req), filter);
  const canStart = can(req.operator!.role, 'replays.start');
  const rest = await restOf(deps, query.rest);
  return sendPage(
    req,
    reply,
    frame,
    html`${form}${planView({ plan, filter, canStart, defaultRate: deps.defaultRate, maxRate: deps.maxRate, rest })}`,
  );
}

/** The cancelled replay a "Dry run the rest" came from (`rest=<id>`), if it is one. */
async function restOf(deps: ReplayDeps, id: unknown): Promise<ReplayView | undefined> {
  const n = Number(id);
  if (typeof id !== 'string' || !Number.isSafeInteger(n) || n <= 0) return undefined;
  const replay = await getReplay(deps.db, n).catch(() => undefined);
  return replay?.status === 'cancelled' ? replay : undefined;
}
