/** `/merchants` and `/merchants/:ref`: the same query as `GET /api/merchants`, and the merchant's 24-hour picture. */
import { pageRoute } from '../web/page-route.ts';
import type { RouteRow } from '../web/route-table.ts';
import { flashOf, sendPage } from '../web/send.ts';
import { merchantOf, pictureOf } from './api.ts';
import { visibleMerchants, type MerchantsDeps } from './deps.ts';
import { merchantFigures } from './queries.ts';
import { merchantPage, merchantsAttention, merchantsPage } from './views.ts';
import type { FastifyRequest } from 'fastify';
import type { Html } from '../web/html.ts';

export function merchantsPageRows(deps: MerchantsDeps): RouteRow[] {
  return [
    pageRoute({
      url: '/merchants',
      action: 'read',
      handler: async (req, reply) =>
        sendPage(
          req,
          reply,
          { title: 'Merchants', area: 'merchants', flash: flashOf(req.query) },
          merchantsPage(await merchantFigures(deps, visibleMerchants(deps, req))),
        ),
    }),
    pageRoute({
      url: '/merchants/:ref',
      action: 'read',
      handler: async (req, reply) => {
        const merchant = merchantOf(deps, req, String((req.params as { ref?: unknown }).ref ?? ''));
        const [[figures], minutes] = await Promise.all([merchantFigures(deps, [merchant]), pictureOf(deps, merchant)]);
        return sendPage(
          req,
          reply,
          { title: `Merchant ${merchant.ref}`, area: 'merchants', flash: flashOf(req.query) },
          merchantPage(figures!, minutes, req.operator!),
        );
      },
    }),
  ];
}

/**
 * The landing page's lines for the merchants that need a person (nothing when all is well, or when the figures cannot
 * be read: the landing page never fails for them).
 */
export function landingLines(deps: MerchantsDeps): (req: FastifyRequest) => Promise<Html | ''> {
  return async (req) => {
    try {
      return merchantsAttention(await merchantFigures(deps, visibleMerchants(deps, req)));
    } catch (e) {
      req.log.warn({ err: e }, 'merchants figures for the landing page not read');
      return '';
    }
  };
}
