import { randomBytes } from 'node:crypto';
import fastifySwagger from '@fastify/swagger';
import { catalogScopeOf, createCatalogCache, type CatalogCache } from '@mcb/core/catalog';
import type { Config } from '@mcb/core/config';
import type { Db } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { Counter, type Registry } from '@mcb/core/metrics';
import { readFleetState, type PlatformClient } from '@mcb/core/platform';
import type { RedisClient } from '@mcb/core/redis';
import type { Queue } from 'bullmq';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { auditRows } from './audit/api.ts';
import { auditPageRows } from './audit/pages.ts';
import { installAuth } from './auth.ts';
import { targetMerchantOf } from './audit/target-merchant.ts';
import { installServiceGate } from './operators/service-gate.ts';
import { installRoleCheck, registerRoutes, type RouteRow } from './web/route-table.ts';
import { dashboardPlugin } from './dashboard/dashboard.ts';
import { installErrorHandler } from './error-handler.ts';
import { whoamiRows } from './operators/api.ts';
import {
  createOperatorDirectory,
  loadOperatorsFile,
  type OperatorDirectory,
  type OperatorEntry,
} from './operators/directory.ts';
import { trustedProxies } from './operators/trusted-proxies.ts';
import { callbacksPageRows } from './callbacks/pages.ts';
import { callbacksRows } from './callbacks/api.ts';
import {
  consoleMerchantNo,
  consoleMerchants,
  type ConsoleMerchant,
  type ConsoleMerchants,
  type RouteDeps,
} from './web/route-deps.ts';
import { eventsRows } from './events/api.ts';
import { ordersRows } from './orders/api.ts';
import { paymentMethodsRows } from './catalog/api.ts';
import { payoutsRows } from './payouts/api.ts';
import { reconcileActionDeps } from './reconcile/actions.ts';
import { reconcileRows } from './reconcile/api.ts';
import { replaysRows } from './replays/api.ts';
import type { ReplayDeps } from './replays/actions.ts';
import { startReplayDriver } from './replays/driver.ts';
import { replaysPageRows } from './replays/pages.ts';
import { createGetOrderCache } from './replays/plan.ts';
import { createAuthFailureLimiter } from './session/auth-failures.ts';
import { loginRoutes } from './session/login-routes.ts';
import { reviewsRows } from './reviews/api.ts';
import { reviewsPageRows } from './reviews/pages.ts';
import { searchPageRows } from './search/pages.ts';
import { ordersPageRows } from './orders/pages.ts';
import { createSessionRevocations } from './session/revocations.ts';
import { createSessionCodec } from './session/session-cookie.ts';
import { clientErrorReply, installSecurityHeaders, setSecurityHeaders } from './web/security-headers.ts';
import { assetsPlugin } from './web/assets.ts';
import { acceptForms } from './web/forms.ts';
import { merchantKeys } from '@mcb/core/queue';
import { legacyMerchant } from '@mcb/core/config';
import { singleMerchantQueue, type MerchantQueues } from './callbacks/merchant-queues.ts';
import { merchantsRows } from './merchants/api.ts';
import type { MerchantsDeps } from './merchants/deps.ts';
import { landingLines, merchantsPageRows } from './merchants/pages.ts';
import { startMinutesRollup } from './merchants/rollup-timer.ts';
import { inScope } from './operators/scope.ts';
import { merchantPauseRows } from './merchants/pause-api.ts';
import { merchantPausePageRows } from './merchants/pause-pages.ts';

/** Dependencies of {@link buildApp}; all are created by main.ts (or a test) and closed by it. */
export interface ConsoleDeps {
  /** Loaded with role 'console': `CONSOLE_TOKEN` or `CONSOLE_OPERATORS_FILE` is set. */
  config: Config;
  /**
   * The operators; read from CONSOLE_OPERATORS_FILE when omitted (tests pass them). @defaultValue the file's, or none
   */
  operators?: readonly OperatorEntry[];
  db: Db;
  /** The platform client of the console's home merchant (the legacy one, else the first): the only one's, usually. */
  platform: PlatformClient;
  /**
   * Each merchant's platform client by ref (main.ts builds one per merchant); a merchant missing here uses `platform`,
   * which only the home merchant may. @defaultValue `platform` for the one merchant
   */
  platforms?: ReadonlyMap<string, PlatformClient>;
  logger: Logger;
  /** The catalog cache; built from db, platform and logger when omitted (tests pass one with their own clock). */
  catalog?: CatalogCache;
  /** Where the console's HTTP metrics go; none are recorded when omitted. */
  registry?: Registry;
  /** Each merchant's registry (labelled `merchant`), by ref: its manual sweeps' metrics go there. @defaultValue `registry` */
  merchantRegistries?: ReadonlyMap<string, Registry>;
  /** Largest request body, in bytes. @defaultValue 65536 */
  bodyLimit?: number;
  /**
   * Redis for the reconciliation lock (shared with the workers): enables `POST /api/reconcile`. @defaultValue none
   * (no such route)
   */
  redis?: RedisClient;
  /**
   * The callbacks queue: enables the dashboard at /queues and job lookups in GET /api/callbacks. @defaultValue none
   * (no dashboard)
   */
  queue?: Queue;
  /**
   * Every merchant's callbacks queue (main.ts opens one per merchant: `merchantQueues`); replays, run-now and the
   * dashboard act on them. @defaultValue `queue` alone, as the first merchant's
   */
  queues?: MerchantQueues;
  /** Further queues to show on the dashboard (e.g. maintenance). @defaultValue none */
  extraQueues?: Queue[];
  /** Session lifetime after login, in ms. @defaultValue 14400000 (4 h) */
  sessionTtlMs?: number;
  /** `Secure` on the session cookie: auto (when the request came over https), always, never. @defaultValue 'auto' */
  cookieSecure?: 'auto' | 'always' | 'never';
  /**
   * Drive running replays from this process (the replays table says which; a lease keeps one console per replay).
   * Tests turn it off to drive them themselves. @defaultValue true (with a queue)
   */
  replayDriver?: boolean;
  /** How long GET /api/events waits at a hole in the ids before stepping over it, in ms. @defaultValue 10000 */
  eventsGapGraceMs?: number;
  /**
   * How often this console rolls the merchants' closed minutes up (the 24-hour picture, merchants/minutes.ts), in ms;
   * 0: only when a merchant's page is read. @defaultValue 60000
   */
  minutesRollupEveryMs?: number;
}

/**
 * The console: an internal JSON API behind a bearer token, and its pages. Every area exports its API rows
 * (`<area>/api.ts`, web/route-table.ts), registered here in one loop; the auth hook, the service gate, the role
 * check and the error handler sit on the root instance, so they cover the routes and plugins registered after them
 * as well (a new area: add its rows to {@link apiRows}, its page rows to {@link pageRows}).
 */
export async function buildApp(given: ConsoleDeps): Promise<FastifyInstance> {
  const { config } = given;
  const queues =
    given.queues ??
    (given.queue && singleMerchantQueue(given.queue, legacyMerchant(config.merchants) ?? config.merchants[0]!));
  // `queue` stays the first merchant's for the areas that read one queue (orders, search).
  const deps = { ...given, queues, queue: given.queue ?? queues?.list[0]?.queue };
  const directory = directoryOf(deps);
  // Errors fastify raises before routing (a path parameter over maxParamLength, a malformed URL) would answer
  // before the authentication hook, telling a stranger which routes exist: authenticate first, then answer.
  const auth: { check?: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown> } = {};
  const base = createServer(deps, auth);
  const identity = identityOf(deps);
  const { sessions, revocations, limiter, proxy } = identity;
  auth.check = installAuth(base, {
    directory,
    sessions,
    revocations,
    limiter,
    proxy,
    trustedProxies: identity.trusted,
  });
  installServiceGate(base);
  // The merchants are known before the routes: the role check's refusals record the merchant of what was refused.
  const merchants = consoleMerchantsOf(deps);
  installRoleCheck(base, {
    db: deps.db.db,
    logger: deps.logger,
    targetMerchant: targetMerchantOf({ db: deps.db.db, merchants }),
  });
  if (deps.registry) installMetrics(base, deps.registry);
  const app = base.withTypeProvider<ZodTypeProvider>();

  await app.register(fastifySwagger, {
    openapi: {
      info: { title: 'Merchant callbacks console API', version: '1.0.0', description: 'See docs/console.md.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
  });

  const routeDeps: RouteDeps = {
    db: deps.db,
    catalog: merchants.byNo(consoleMerchantNo(config.merchants))!.catalog,
    logger: deps.logger,
    ...(deps.queue ? { queue: deps.queue } : {}),
    ...(queues?.several ? { queueOf: (merchantNo: string) => queues.byMerchantNo(merchantNo)?.queue } : {}),
    merchantNo: consoleMerchantNo(config.merchants),
    merchants,
  };
  const merchantsDeps = merchantsDepsOf(deps);
  if (deps.minutesRollupEveryMs !== 0) {
    const rollup = startMinutesRollup({
      db: deps.db.db,
      merchantNos: config.merchants.map((m) => m.merchantNo),
      logger: deps.logger,
      everyMs: deps.minutesRollupEveryMs,
    });
    app.addHook('onClose', () => rollup.close());
  }
  // The areas' route tables, registered in one loop; the role check is one hook over them (web/route-table.ts).
  registerRoutes(app, [...apiRows(deps, routeDeps), ...merchantsRows(merchantsDeps)]);
  await app.register(loginRoutes, {
    directory,
    sessions,
    revocations,
    cookieSecure: deps.cookieSecure ?? config.CONSOLE_COOKIE_SECURE,
    trustedProxies: identity.trusted,
    limiter,
  });
  await app.register(assetsPlugin);
  // Replays (API and wizard) need the queue: its failed jobs are what they send back.
  const replayDeps = queues && replayDepsOf(deps, queues, merchants);
  if (replayDeps) {
    if (replayDeps.close) app.addHook('onClose', replayDeps.close);
    registerRoutes(app, replaysRows(replayDeps));
  }
  // Server-rendered pages (STYLE 16-21): one scope that accepts HTML form posts; the areas' page rows, registered by
  // the same loop and checked by the same role hook as the API's (web/page-route.ts).
  await app.register(async (pages) => {
    acceptForms(pages);
    registerRoutes(pages, [...pageRows(deps, replayDeps, merchants), ...merchantsPageRows(merchantsDeps)], 'page');
  });
  if (queues)
    await app.register(dashboardPlugin, {
      queues: [...queues.list.map((m) => m.queue), ...(deps.extraQueues ?? [])],
      actions: { db: deps.db.db, logger: deps.logger },
      // By name in any case: a refusal of `CALLBACKS-A` names a's merchant (Redis would not find it; no one acts).
      merchantOfQueue: (name) =>
        queues.list.find((m) => m.queue.name.toLowerCase() === name.toLowerCase())?.merchantNo ?? null,
    });

  app.get('/api/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  app.setNotFoundHandler(async (req) => {
    throw new AppError(ErrorCodes.NOT_FOUND, `no route ${req.method} ${req.url.split('?')[0]}`);
  });
  return base;
}

/** The operators (the file's, or the test's) and CONSOLE_TOKEN's admin; a configuration error when there are none. */
function directoryOf({ config, operators: given }: ConsoleDeps): OperatorDirectory {
  const operators = given ?? (config.CONSOLE_OPERATORS_FILE ? loadOperatorsFile(config.CONSOLE_OPERATORS_FILE) : []);
  const directory = createOperatorDirectory({ token: config.CONSOLE_TOKEN, operators, merchants: config.merchants });
  if (directory.size === 0)
    throw new AppError(
      ErrorCodes.CONFIG_INVALID,
      'CONSOLE_TOKEN: required for console, or CONSOLE_OPERATORS_FILE with at least one operator (unset)',
    );
  // A session key that is someone's bearer token would let that person sign a session naming any operator.
  if (config.CONSOLE_SESSION_SECRET !== undefined && directory.byToken(config.CONSOLE_SESSION_SECRET)) {
    throw new AppError(
      ErrorCodes.CONFIG_INVALID,
      "CONSOLE_SESSION_SECRET: must not be a bearer token (CONSOLE_TOKEN or an operator's): " +
        'generate its own random value (value hidden)',
    );
  }
  return directory;
}

/** The root instance: JSON and zod only, the one error boundary, and the security headers on every response. */
function createServer(
  deps: ConsoleDeps,
  auth: { check?: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown> },
): FastifyInstance {
  const base = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    frameworkErrors: async (error, req, reply) => {
      // No onSend hook runs for these replies: the security headers are set here (web/security-headers.ts).
      setSecurityHeaders(reply as unknown as FastifyReply);
      await auth.check?.(req as unknown as FastifyRequest, reply as unknown as FastifyReply);
      if (reply.sent) return;
      const r = reply as unknown as FastifyReply;
      const status = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 414 : 400;
      return r
        .code(status)
        .send({ code: ErrorCodes.REQUEST_INVALID, message: 'malformed request URL', requestId: req.id });
    },
    // Requests Node's parser refuses (431 headers too large, 400, 408) answered with the security headers too.
    clientErrorHandler: clientErrorReply,
    bodyLimit: deps.bodyLimit ?? 65_536,
    // Routes are matched exactly; no trailing-slash or case variants that could slip past a reviewer's eye.
    routerOptions: { ignoreTrailingSlash: false, caseSensitive: true },
  });
  // JSON only: a text/plain body would otherwise reach the schemas as a string.
  base.removeContentTypeParser('text/plain');
  base.setValidatorCompiler(validatorCompiler);
  base.setSerializerCompiler(serializerCompiler);
  installErrorHandler(base);
  installSecurityHeaders(base);
  return base;
}

/** How a person is known besides their token: sessions, the failed-authentication limit, the SSO proxy. */
function identityOf({ config, db, sessionTtlMs }: ConsoleDeps) {
  // Never derived from a bearer token (its holder could mint a session for any operator). Without a configured secret
  // (allowed only without an operators file: loadConfig), a random one: sessions last until this process ends.
  const sessionSecret = config.CONSOLE_SESSION_SECRET ?? randomBytes(32).toString('base64url');
  const trusted = config.CONSOLE_TRUSTED_PROXIES ? trustedProxies(config.CONSOLE_TRUSTED_PROXIES) : undefined;
  return {
    sessions: createSessionCodec({ secret: sessionSecret, ttlMs: sessionTtlMs }),
    revocations: createSessionRevocations(db.db),
    limiter: createAuthFailureLimiter({
      perAddress: config.CONSOLE_AUTH_MAX_FAILURES,
      global: config.CONSOLE_AUTH_MAX_FAILURES_GLOBAL,
      windowMs: config.CONSOLE_AUTH_FAILURE_WINDOW,
    }),
    trusted,
    proxy:
      config.CONSOLE_AUTH_PROXY_HEADER && trusted
        ? { header: config.CONSOLE_AUTH_PROXY_HEADER.toLowerCase(), trusted }
        : undefined,
  };
}

/**
 * The merchants this console serves (issue 50): each with its platform client (`platforms`, or `platform` for the home
 * merchant) and its own catalog cache (`catalog` for the home merchant when a test passes one).
 */
function consoleMerchantsOf(deps: ConsoleDeps): ConsoleMerchants {
  const homeNo = consoleMerchantNo(deps.config.merchants);
  const all = deps.config.merchants.map((merchant): ConsoleMerchant => {
    const home = merchant.merchantNo === homeNo;
    const platform = deps.platforms?.get(merchant.ref) ?? (home ? deps.platform : undefined);
    if (!platform)
      throw new AppError(ErrorCodes.CONFIG_INVALID, `merchant ${merchant.ref}: no platform client was built for it`);
    const catalog =
      (home ? deps.catalog : undefined) ??
      createCatalogCache({ db: deps.db.db, platform, logger: deps.logger, merchantScope: catalogScopeOf(merchant) });
    return { merchant, platform, catalog };
  });
  return consoleMerchants(all);
}

/** The merchants area's figures: the database, every merchant's queue, and Redis for the workers' live figures. */
function merchantsDepsOf(deps: ConsoleDeps & { queues?: MerchantQueues | undefined }): MerchantsDeps {
  return {
    db: deps.db.db,
    ...(deps.queues ? { queues: deps.queues } : {}),
    ...(deps.redis ? { redis: deps.redis } : {}),
    queuePrefix: deps.config.QUEUE_PREFIX,
    defaultGetOrderRps: deps.config.PLATFORM_MAX_RPS,
    merchants: deps.config.merchants,
    // An operator scoped to merchants sees only theirs: the list, the API, the landing lines and a merchant's page.
    visible: (req) =>
      deps.config.merchants.filter((m) => req.operator !== undefined && inScope(req.operator, m.merchantNo)),
  };
}

/** Every area's API rows but the replays' (registered with the replay driver, which needs the queue). */
function apiRows(
  deps: ConsoleDeps & { config: Config; queues?: MerchantQueues | undefined },
  routeDeps: RouteDeps,
): RouteRow[] {
  const { merchants } = routeDeps;
  return [
    ...whoamiRows(),
    ...auditRows({ db: deps.db.db, merchants }),
    ...ordersRows(routeDeps),
    ...payoutsRows(routeDeps),
    ...paymentMethodsRows(routeDeps),
    ...(deps.redis ? reconcileRows(reconcileActionDeps({ ...deps, merchants, redis: deps.redis })) : []),
    ...eventsRows({ db: deps.db.db, gapGraceMs: deps.eventsGapGraceMs, merchants }),
    ...callbacksRows({ db: deps.db.db, queues: deps.queues, merchants }),
    ...reviewsRows({ db: deps.db.db, platform: deps.platform, merchants, logger: deps.logger }),
    ...merchantPauseRows(pauseDepsOf(deps)),
  ];
}

/** What the pause and resume actions need (the API's rows and the merchant page's forms). */
const pauseDepsOf = (deps: ConsoleDeps & { config: Config }) => ({
  db: deps.db.db,
  logger: deps.logger,
  merchants: deps.config.merchants,
  redis: deps.redis,
  queuePrefix: deps.config.QUEUE_PREFIX,
});

/** Every area's page rows (the replay wizard's only with the queue, as its API). */
function pageRows(
  deps: ConsoleDeps & { config: Config },
  replayDeps: ReplayDeps | undefined,
  merchants: ConsoleMerchants,
): RouteRow[] {
  const redis = deps.redis;
  return [
    ...searchPageRows({
      db: deps.db,
      queue: deps.queue,
      ...(deps.queues ? { queueOf: (no: string) => deps.queues?.byMerchantNo(no)?.queue } : {}),
      merchantNo: consoleMerchantNo(deps.config.merchants),
      merchants,
      platformState: redis && (() => readFleetState(redis, merchantKeys(deps.config.QUEUE_PREFIX).fleet)),
      merchantsAttention: landingLines(merchantsDepsOf(deps)),
    }),
    ...callbacksPageRows({
      db: deps.db.db,
      logger: deps.logger,
      queues: deps.queues,
      merchants,
      platformState: redis && (() => readFleetState(redis, merchantKeys(deps.config.QUEUE_PREFIX).fleet)),
    }),
    ...ordersPageRows({
      db: deps.db,
      queue: deps.queue,
      ...(deps.queues?.several ? { queueOf: (no: string) => deps.queues?.byMerchantNo(no)?.queue } : {}),
      logger: deps.logger,
      merchantNo: consoleMerchantNo(deps.config.merchants),
      merchants,
    }),
    ...reviewsPageRows({ db: deps.db.db, platform: deps.platform, merchants, logger: deps.logger }),
    ...auditPageRows({ db: deps.db.db, merchants }),
    ...(replayDeps ? replaysPageRows(replayDeps, merchants) : []),
    ...merchantPausePageRows(pauseDepsOf(deps)),
  ];
}

/** The replays' dependencies, and their driver (closed with the app) unless the caller drives replays itself. */
function replayDepsOf(
  deps: ConsoleDeps & { config: Config },
  queues: MerchantQueues,
  merchants: ConsoleMerchants,
): ReplayDeps & { close?: () => Promise<void> } {
  const driver =
    deps.replayDriver === false ? undefined : startReplayDriver({ db: deps.db.db, queues, logger: deps.logger });
  return {
    db: deps.db.db,
    logger: deps.logger,
    queues,
    platform: deps.platform,
    platformFor: (merchantNo) => merchants.byNo(merchantNo)?.platform,
    cache: createGetOrderCache(),
    defaultRate: deps.config.CONSOLE_REPLAY_RATE,
    maxRate: deps.config.CONSOLE_REPLAY_MAX_RATE,
    // The dry run decides with the worker's bounds (one shared env), so its preview is what the worker then does.
    orderGracePeriodMs: deps.config.ORDER_GRACE_PERIOD,
    confirmMaxWaitMs: deps.config.CONFIRM_MAX_WAIT,
    maxUnknownWaiting: deps.config.WORKER_MAX_UNKNOWN_WAITING,
    redis: deps.redis,
    wake: () => driver?.wake(),
    close: driver && (() => driver.close()),
  };
}

function installMetrics(app: FastifyInstance, registry: Registry): void {
  const requests = new Counter({
    name: 'console_http_requests_total',
    help: 'Console API requests by route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  app.addHook('onResponse', async (req, reply) => {
    requests.inc({ method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) });
  });
}
