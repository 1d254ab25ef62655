/**
 * The replay wizard's pages: /replays (list), /replays/new (filter, dry run, start form), /replays/{id} (progress,
 * cancel). They call the same actions and queries as the JSON API (STYLE 17) and ask `can` before rendering a
 * control (STYLE 18); a refused or invalid form comes back as a flash line on the same page.
 */
import { AppError, ErrorCodes, isAppError, isRefusal } from '@mcb/core/errors';
import type { FastifyPluginAsync } from 'fastify';
import { FILTER_FIELDS, filterOfForm, filterParams, formValues } from '../callbacks/form.ts';
import type { CallbackFilter } from '../callbacks/queries.ts';
import { assertCan } from '../audit/perform.ts';
import { actorOf } from '../operators/operator.ts';
import { can } from '../operators/roles.ts';
import { formAction } from '../web/forms.ts';
import { html } from '../web/html.ts';
import { flashOf, redirectWithFlash, sendPage } from '../web/send.ts';
import { cancelReplay, planReplayAction, startReplay, type ReplayDeps } from './actions.ts';
import { getReplay, listReplays } from './queries.ts';
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

export const replaysPages: FastifyPluginAsync<ReplayDeps> = async (app, deps) => {
  app.get('/replays', { schema: { hide: true } }, async (req, reply) => {
    const vm = { replays: await listReplays(deps.db), canPlan: can(req.operator!.role, 'replays.plan') };
    return sendPage(req, reply, { title: 'Replays', area: 'replays', flash: flashOf(req.query) }, listView(vm));
  });

  app.get('/replays/new', { schema: { hide: true } }, async (req, reply) => {
    // The wizard is for those who may dry-run (it asks Get order); a viewer is told which role it needs.
    assertCan(req.operator!, 'replays.plan');
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
    return sendPage(
      req,
      reply,
      frame,
      html`${form}${planView({ plan, filter, canStart, defaultRate: deps.defaultRate, maxRate: deps.maxRate })}`,
    );
  });

  app.post('/replays', { schema: { hide: true } }, async (req, reply) => {
    const form = (req.body ?? {}) as Record<string, unknown>;
    const back = `/replays/new?${backParams(form)}`;
    try {
      const rate =
        typeof form.ratePerSecond === 'string' && form.ratePerSecond.trim() ? Number(form.ratePerSecond) : undefined;
      if (rate !== undefined && !Number.isInteger(rate))
        throw new AppError(ErrorCodes.REQUEST_INVALID, 'jobs per second: expected a whole number');
      const replay = await startReplay(deps, actorOf(req), {
        filter: filterOfForm(form),
        ratePerSecond: rate,
        reason: typeof form.reason === 'string' ? form.reason : undefined,
      });
      // Started: on to its progress page; refused: back to the dry run, with why.
      return redirectWithFlash(reply, `/replays/${replay.id}`, {
        kind: 'ok',
        text: `replay ${replay.id} started: ${replay.total} job(s) at ${replay.ratePerSecond} per second`,
      });
    } catch (e) {
      // A refusal (a 4xx code of the error catalogue) is told on the page itself; anything else goes to the boundary.
      if (isAppError(e) && isRefusal(e.code)) return redirectWithFlash(reply, back, { kind: 'error', text: e.message });
      throw e;
    }
  });

  app.get('/replays/:id', { schema: { hide: true } }, async (req, reply) => {
    const replay = await getReplay(deps.db, idOf(req.params));
    const role = req.operator!.role;
    const canCancel = can(role, replay.operator === req.operator!.name ? 'replays.cancel' : 'replays.cancelOthers');
    const canPlan = can(role, 'replays.plan');
    return sendPage(
      req,
      reply,
      { title: `Replay ${replay.id}`, area: 'replays', flash: flashOf(req.query) },
      progressView({ replay, canCancel, canPlan }),
    );
  });

  app.post('/replays/:id/cancel', { schema: { hide: true } }, async (req, reply) => {
    const id = idOf(req.params);
    const form = (req.body ?? {}) as Record<string, unknown>;
    return formAction(reply, `/replays/${id}`, async () => {
      const replay = await cancelReplay(deps, actorOf(req), id, form.reason);
      return `replay ${id} cancelled after ${replay.replayed} of ${replay.total} job(s)`;
    });
  });
};
