import type { Database } from '@mcb/core/db';
import { z } from 'zod';
import { errorBodySchema } from '../web/api-schemas.ts';
import { auditFilterSchema, auditPageSchema, listAudit, withoutBlanks } from './queries.ts';
import { route, type RouteRow } from '../web/route-table.ts';
import { listScopeOf } from '../operators/scope.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';

/** `GET /api/audit`: who did what, when, why, and how it ended. */
export function auditRows({ db, merchants }: { db: Database; merchants?: ConsoleMerchants }): RouteRow[] {
  return [
    route({
      method: 'GET',
      url: '/api/audit',
      action: 'read',
      schema: {
        summary: 'The audit trail of operator actions, newest first',
        description:
          'The append-only `operator_actions`: time, operator, role, action, target, reason, outcome, ' +
          'request id. Filters: operator, action, target, from, to, services (rows of `service` clients ' +
          "are hidden unless `services=show|only`); page with `before`. An admin reads every operator's; " +
          "others their own (403 for someone else's).",
        tags: ['audit'],
        querystring: z.preprocess(withoutBlanks, auditFilterSchema),
        response: { 200: auditPageSchema, 400: errorBodySchema, 403: errorBodySchema },
      },
      handler: async (req) =>
        listAudit(db, req.operator!, req.query, listScopeOf(req.operator!, merchants, req.query.merchant)),
    }),
  ];
}
