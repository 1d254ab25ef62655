import { ErrorCodes } from '@mcb/core/errors';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The routes a `service` client may call besides the API's reads: order registration, nothing else. */
export const SERVICE_WRITES: ReadonlySet<string> = new Set(['POST /api/payins', 'POST /api/payouts']);

/** Whether a `service` client may call this route (by the route fastify matched, never the URL as sent). */
export function serviceMayCall(method: string, route: string | undefined): boolean {
  if (route === undefined) return false;
  if ((method === 'GET' || method === 'HEAD') && route.startsWith('/api/')) return true;
  return SERVICE_WRITES.has(`${method} ${route}`);
}

/** A registered route, with the action of its table row when it came from one (web/route-table.ts). */
export interface RegisteredRoute {
  method: string;
  url: string;
  /** The action of its row in an API table (JSON in and out). */
  action?: string;
  /** The action of its row in a pages table (HTML, form posts): kept apart, each surface's test walks its own rows. */
  pageAction?: string;
}

const ROUTES = new WeakMap<FastifyInstance, RegisteredRoute[]>();

/** Every route registered on `app` after {@link installServiceGate} (plugins' included): what the tests walk. */
export function routesOf(app: FastifyInstance): readonly RegisteredRoute[] {
  return ROUTES.get(app) ?? [];
}

/**
 * A `service` client (the shop's order system) is not an operator: it reads the JSON API and registers orders, and
 * gets 403 for everything else (every other action, every page, the dashboard, whatever the route does) before any
 * route runs. One onRequest hook on the root instance, after authentication, so that routes added later are covered.
 * The refusal is logged at warn, not written to the audit trail: nothing was attempted on anyone's behalf.
 */
export function installServiceGate(app: FastifyInstance): void {
  const routes: RegisteredRoute[] = [];
  ROUTES.set(app, routes);
  app.addHook('onRoute', (r) => {
    const { action, surface } = r.config ?? {};
    const row = action === undefined ? {} : surface === 'page' ? { pageAction: action } : { action };
    for (const method of [r.method].flat()) routes.push({ method, url: r.url, ...row });
  });
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (req.operator?.role !== 'service') return;
    const route = req.routeOptions?.url;
    if (serviceMayCall(req.method, route)) return;
    req.log.warn(
      { operator: req.operator.name, method: req.method, route: route ?? 'unmatched' },
      'service client refused: not an order registration or an API read',
    );
    return reply.code(403).send({
      code: ErrorCodes.FORBIDDEN,
      message:
        `${req.operator.name} is a service client: it may register orders (POST /api/payins, /api/payouts) ` +
        'and read the API (GET /api/...), nothing else',
      requiredRole: 'operator',
      requestId: req.id,
    });
  });
}
