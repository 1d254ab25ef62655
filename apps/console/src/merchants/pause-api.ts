import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { errorBodySchema, reasonSchema } from '../web/api-schemas.ts';
import { route, type RouteRow } from '../web/route-table.ts';
import {
  merchantPauseViewSchema,
  merchantTarget,
  pauseMerchant,
  resumeMerchant,
  type MerchantPauseDeps,
} from './pause.ts';

/** The ref a request names, as sent (for a refusal's audit row, before validation). */
const refOf = (req: FastifyRequest): string => String((req.params as { ref?: unknown }).ref ?? '');

const refParams = z.object({ ref: z.string().min(1).max(64).describe("The merchant's ref (MERCHANTS_FILE)") });
const body = z.strictObject({ reason: reasonSchema.optional() }).optional();

/** What differs between the two verbs' routes: the action and the words of its documentation. */
const VERBS = {
  pause: {
    act: pauseMerchant,
    summary: 'Pause a merchant',
    description:
      "Holds the merchant's crediting: its callbacks are still acknowledged and stored, but no worker takes its " +
      'jobs (those in progress finish; credits stop within 2 s), its reconciliation sweep and its replays wait, ' +
      'and past MERCHANT_PAUSED_MAX_BACKLOG stored callbacks ingest answers its new ones 503 fail. Other ' +
      'merchants go on. Survives worker restarts and a Redis failover (Postgres holds it). Role operator; ' +
      '`reason` required. 409 MERCHANT_ALREADY_PAUSED when it is paused already (the first pause stays).',
    conflict: 'Already paused (MERCHANT_ALREADY_PAUSED)',
  },
  resume: {
    act: resumeMerchant,
    summary: 'Resume a paused merchant',
    description:
      'The workers take its jobs again within a second and drain its backlog at its Get order budget ' +
      '(getOrderRps); its sweep and replays go on. Role operator; `reason` required. 409 MERCHANT_NOT_PAUSED ' +
      'when it is not paused.',
    conflict: 'Not paused (MERCHANT_NOT_PAUSED)',
  },
} as const;

/**
 * `POST /api/merchants/:ref/pause` and `/resume` (docs/merchants.md "Pausing a merchant"). The rules (role, reason,
 * audit) live in pause.ts; these routes only call it.
 */
export function merchantPauseRows(deps: MerchantPauseDeps): RouteRow[] {
  return (['pause', 'resume'] as const).map((verb) => {
    const { act, summary, description, conflict } = VERBS[verb];
    return route({
      method: 'POST',
      url: `/api/merchants/:ref/${verb}`,
      action: `merchants.${verb}`,
      target: (req) => merchantTarget(refOf(req)),
      schema: {
        summary,
        description,
        tags: ['merchants'],
        params: refParams,
        body,
        response: {
          200: merchantPauseViewSchema,
          400: errorBodySchema,
          403: errorBodySchema,
          404: errorBodySchema.describe('No merchant has this ref'),
          409: errorBodySchema.describe(conflict),
        },
      },
      handler: async (req) => act(deps, actorOf(req), { ref: req.params.ref, reason: req.body?.reason }),
    });
  });
}
