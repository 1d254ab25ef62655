import type {
  FastifyInstance,
  FastifyRequest,
  FastifySchema,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
  RouteHandlerMethod,
} from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { authorize, forbidden, type ActionDeps } from '../audit/perform.ts';
import type { TargetMerchant } from '../audit/target-merchant.ts';
import { actorOf } from '../operators/operator.ts';
import { can, CHANGES_NOTHING, requiredRole, type Action, type PersonRole } from '../operators/roles.ts';

/**
 * One row of an area's route table (bull-board's `routes.js` is the model): what the route is, what it does in the
 * action table, and the handler. Each area exports its rows; {@link registerRoutes} registers them all in one loop,
 * and {@link installRoleCheck} refuses a row's action to a role that may not do it, before the body is validated.
 */
export interface RouteRow<S extends FastifySchema = FastifySchema> {
  method: 'GET' | 'POST';
  url: string;
  /** What the route does in roles.ts's action table: `read` for every read. */
  action: Action;
  /** The action of this request when the body decides it (`POST /api/replays`: a dry run or a start). */
  actionOf?: (req: FastifyRequest) => Action;
  /**
   * What an action is done to, for the audit row of a refusal (`order:MO-1`, `sweep`); from the unvalidated request.
   */
  target?: (req: FastifyRequest) => string;
  schema: S;
  handler: RouteHandlerMethod<
    RawServerDefault,
    RawRequestDefaultExpression,
    RawReplyDefaultExpression,
    RouteGenericInterface,
    unknown,
    S,
    ZodTypeProvider
  >;
}

/** The least role of a row (for the docs and the tests): the action table's, never compared by hand. */
export const roleOf = (r: Pick<RouteRow, 'action'>): PersonRole => requiredRole(r.action);

/** A row, typed by its schema (the handler sees the parsed query, params and body). */
export const route = <S extends FastifySchema>(r: RouteRow<S>): RouteRow => r as unknown as RouteRow;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The action of the route's row (routes registered from a table only). */
    action?: Action;
    /** The row's per-request action (see {@link RouteRow.actionOf}). */
    actionOf?: (req: FastifyRequest) => Action;
    /** The row's target (see {@link RouteRow.target}). */
    target?: (req: FastifyRequest) => string;
    /** Which table the row came from: the JSON API's or the pages' (see {@link registerRoutes}). */
    surface?: Surface;
  }
}

/** The API's rows answer JSON; the pages' rows answer HTML and take form posts (web/page-route.ts). */
export type Surface = 'api' | 'page';

/**
 * Register every row, in one loop: the row's action travels in the route's config for the role check. The pages'
 * rows are registered in the pages' scope (which accepts form posts) with `surface: 'page'`.
 */
export function registerRoutes(app: FastifyInstance, rows: readonly RouteRow[], surface: Surface = 'api'): void {
  for (const r of rows)
    app.route({
      method: r.method,
      url: r.url,
      schema: r.schema,
      config: {
        action: r.action,
        surface,
        ...(r.actionOf ? { actionOf: r.actionOf } : {}),
        ...(r.target ? { target: r.target } : {}),
      },
      handler: r.handler as RouteHandlerMethod,
    });
}

/**
 * The role check of every table route, one hook, before the request is validated: a role that may not do the row's
 * action gets 403 naming the role it needs, and the refusal is written to the audit trail (`denied`) by the action
 * layer's {@link authorize}. A permitted action's handler still goes through the action layer for its reason and
 * its audit row. (A `service` client never gets here for anything but its own routes: operators/service-gate.ts.)
 */
export function installRoleCheck(app: FastifyInstance, deps: ActionDeps & { targetMerchant?: TargetMerchant }): void {
  app.addHook('preValidation', async (req) => {
    const { actionOf, target } = req.routeOptions.config ?? {};
    const action = actionOf ? actionOf(req) : req.routeOptions.config?.action;
    if (action === undefined || !req.operator || can(req.operator.role, action)) return;
    if (CHANGES_NOTHING.has(action)) throw forbidden(req.operator, action);
    const body = (req.body ?? {}) as { reason?: unknown };
    const about = target?.(req) ?? req.routeOptions.url ?? '';
    await authorize(deps, actorOf(req), {
      action,
      target: about,
      reason: body.reason,
      // The refusal records the merchant the action was about (a viewer's on A's review: A's number).
      merchant: (await deps.targetMerchant?.(req, about).catch(() => null)) ?? null,
    });
  });
}
