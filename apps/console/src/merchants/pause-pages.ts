/**
 * The merchant page's pause and resume forms (`POST /merchants/:ref/pause` and `/resume`): the same actions as the API
 * (pause.ts: role operator, a reason, audited with the merchant), back to the merchant's page with what was done or why
 * not (post/redirect/get). A refusal (no reason, already paused, not paused) is a flash line on the page; a role
 * refusal stays a 403 (the page never offered the form).
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { formRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { merchantTarget, pauseMerchant, resumeMerchant, type MerchantPauseDeps } from './pause.ts';

const refParams = z.object({ ref: z.string().min(1).max(64) });
const pauseForm = z.object({ reason: z.string().optional() });
const refOf = (req: FastifyRequest): string => String((req.params as { ref?: unknown }).ref ?? '');
/** The merchant's page (a ref nobody configured comes back to the list: its page would be a 404). */
const backOf = (deps: MerchantPauseDeps) => (req: FastifyRequest) =>
  deps.merchants.some((m) => m.ref === refOf(req)) ? `/merchants/${encodeURIComponent(refOf(req))}` : '/merchants';

export function merchantPausePageRows(deps: MerchantPauseDeps): RouteRow[] {
  return [
    formRoute({
      url: '/merchants/:ref/pause',
      action: 'merchants.pause',
      target: (req) => merchantTarget(refOf(req)),
      params: refParams,
      form: pauseForm,
      back: backOf(deps),
      run: async (req, { params: { ref }, form }) => {
        const view = await pauseMerchant(deps, actorOf(req), { ref, reason: form.reason });
        return `Merchant ${view.merchant} paused: none of its jobs runs until it is resumed; its callbacks are still acknowledged and stored.`;
      },
    }),
    formRoute({
      url: '/merchants/:ref/resume',
      action: 'merchants.resume',
      target: (req) => merchantTarget(refOf(req)),
      params: refParams,
      form: pauseForm,
      back: backOf(deps),
      run: async (req, { params: { ref }, form }) => {
        const view = await resumeMerchant(deps, actorOf(req), { ref, reason: form.reason });
        return `Merchant ${view.merchant} resumed: its backlog drains at its Get order budget.`;
      },
    }),
  ];
}
