import type { Database } from '@mcb/core/db';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '../web/api-schemas.ts';
import { auditFilterSchema, auditPageSchema, listAudit, withoutBlanks } from './queries.ts';

/** `GET /api/audit`: who did what, when, why, and how it ended. */
export const auditApi: FastifyPluginAsyncZod<{ db: Database }> = async (app, { db }) => {
  app.get(
    '/api/audit',
    {
      schema: {
        summary: 'The audit trail of operator actions, newest first',
        description:
          'The append-only `operator_actions`: time, operator, role, action, target, reason, outcome, request id. Filters: operator, action, target, from, to, services (rows of `service` clients are hidden unless `services=show|only`); page with `before`. An admin reads every operator\'s; others their own (403 for someone else\'s).',
        tags: ['audit'],
        querystring: z.preprocess(withoutBlanks, auditFilterSchema),
        response: { 200: auditPageSchema, 400: errorBodySchema, 403: errorBodySchema },
      },
    },
    async (req) => listAudit(db, req.operator!, req.query),
  );
};
