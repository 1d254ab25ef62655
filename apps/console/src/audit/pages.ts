import type { Database } from '@mcb/core/db';
import { pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { auditFilterSchema, listAudit, withoutBlanks } from './queries.ts';
import { auditLogPage } from './views.ts';
import { listScopeOf } from '../operators/scope.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';
import { merchantChoices } from '../web/merchant-field.ts';

/** `/audit`: the same query as `GET /api/audit`, as a page. */
export function auditPageRows({ db, merchants }: { db: Database; merchants?: ConsoleMerchants }): RouteRow[] {
  return [
    pageRoute({
      url: '/audit',
      action: 'read',
      handler: async (req, reply) => {
        const filter = auditFilterSchema.parse({ ...withoutBlanks(req.query), limit: 50 });
        const page = await listAudit(db, req.operator!, filter, listScopeOf(req.operator!, merchants, filter.merchant));
        return sendPage(
          req,
          reply,
          { title: 'Audit', area: 'audit', flash: flashOf(req.query) },
          auditLogPage(page, filter, req.operator!, merchantChoices(req.operator!, merchants)),
        );
      },
    }),
  ];
}
