import { createBullBoard } from '@bull-board/api';
import type { QueueAdapterOptions } from '@bull-board/api/typings/app';
import { FreshRetryBullMQAdapter } from './fresh-retry-adapter.ts';
import { FastifyAdapter } from '@bull-board/fastify';
import type { AppError } from '@mcb/core/errors';
import { coerceError, ErrorCodes, isAppError } from '@mcb/core/errors';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { authorize, completeIntentFailed, recordIntent, type ActionDeps, type Authorized } from '../audit/perform.ts';
import { completeIntent } from '../audit/record.ts';
import { actorOf } from '../operators/operator.ts';
import { inScope } from '../operators/scope.ts';
import { dashboardActionOf, isAllowedDashboardAction, RETRY_ALL_REFUSED, RETRY_ALL_ROUTE } from './action-guard.ts';
import { BOARD_GUARD_JS } from './board-guard.ts';
import { formatJobData, formatJobName, formatReturnValue } from './job-formatter.ts';

/** Options of {@link dashboardPlugin}. */
export interface DashboardOptions {
  /** The queues to show: the callbacks queue (and the maintenance queue when there is one). */
  queues: Queue[];
  /** The action layer's dependencies: retry and promote are checked (role, X-Reason) and recorded. */
  actions: ActionDeps;
  /** Where the dashboard lives. @defaultValue '/queues' */
  basePath?: string;
  /**
   * The number of the merchant a queue (by name) belongs to; null for a queue of no merchant (maintenance) or of no
   * name the console serves. Operators scoped to merchants see and act on their merchants' queues only.
   * @defaultValue every queue of no merchant
   */
  merchantOfQueue?: (queueName: string) => string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * A dashboard action that passed the role and reason checks, and its intent row, completed once bull-board has
     * answered.
     */
    dashboardAction?: Authorized & { intentId: number };
  }
}

/** The reason an operator typed in the dashboard, sent URI-encoded by board-guard.js (or as plain text by a script). */
function reasonHeader(req: FastifyRequest): string | undefined {
  const raw = req.headers['x-reason'];
  if (typeof raw !== 'string') return undefined;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** A job as bull-board serialises it, without its stack trace (a viewer sees the failure reason, not our frames). */
function withoutStacktrace(job: unknown) {
  if (typeof job === 'object' && job !== null && 'stacktrace' in job) (job as { stacktrace: unknown }).stacktrace = [];
}

function sendError(req: FastifyRequest, reply: FastifyReply, e: AppError, status: number) {
  const body: Record<string, unknown> = { code: e.code, message: e.message, requestId: req.id };
  if (typeof e.details?.requiredRole === 'string') body.requiredRole = e.details.requiredRole;
  if (Array.isArray(e.details?.errors)) body.errors = e.details.errors;
  return reply.code(status).send(body);
}

/**
 * bull-board at `/queues`: inspect jobs (data through {@link formatJobData}; each card named with its order
 * numbers), failure reasons and attempts; retry one job, promote delayed jobs ("Retry all" is the replay wizard's,
 * action-guard.ts says why). Authentication and
 * the CSRF check come from the root auth hook; this plugin adds the action allow-list (action-guard.ts), the role
 * and `X-Reason` checks of the action layer with an audit row per action, a read-only board for viewers, and
 * board-guard.js (hides refused controls, asks for the reason, shows refusals).
 */
export const dashboardPlugin: FastifyPluginAsync<DashboardOptions> = async (app, opts) => {
  const basePath = opts.basePath ?? '/queues';
  const serverAdapter = createBoard(opts.queues, basePath);

  app.get('/assets/board-guard.js', { schema: { hide: true } }, async (_req, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-store').send(BOARD_GUARD_JS),
  );

  // The hooks below are this plugin's own (it is not wrapped in fastify-plugin): they run for bull-board's routes and
  // board-guard.js only, whatever spelling of the path reached them. They decide by the route fastify matched
  // (`routeOptions.url`), never by the raw URL: `/%71ueues/...`, `/queue%73/...` reach the same route as `/queues/...`.
  const patternOf = (req: FastifyRequest) => {
    const route = req.routeOptions.url ?? '';
    return route.startsWith(basePath) ? route.slice(basePath.length) : route;
  };
  const merchantOf = opts.merchantOfQueue ?? (() => null);
  app.addHook('onRequest', clampJobsPerPage);
  app.addHook('onRequest', checkAction(opts.actions, patternOf, merchantOf));
  app.addHook('onResponse', completeAction(opts.actions));
  app.addHook('onSend', readOnlyForViewers(patternOf));
  app.addHook('onSend', onlyQueuesInScope(patternOf, merchantOf));
  await app.register(serverAdapter.registerPlugin(), { prefix: basePath });
};

/** Most jobs one page of the board lists: bull-board's own settings offer 1-50, its API takes any number. */
export const MAX_JOBS_PER_PAGE = 50;

/**
 * The onRequest hook that bounds a page of jobs for every role: bull-board reads `jobsPerPage` with no maximum, and a
 * page of 100,000 jobs is one long Redis call (which every acknowledgement waits behind) and a reply of a gigabyte.
 * A larger number is clamped to {@link MAX_JOBS_PER_PAGE}; what is not a number is left to bull-board's check (400).
 */
async function clampJobsPerPage(req: FastifyRequest) {
  const query = req.query as Record<string, unknown> | undefined;
  // bull-board reads it as Number(text): `1e5` and `0x186a0` are 100,000 too.
  if (typeof query?.jobsPerPage === 'string' && Number(query.jobsPerPage) > MAX_JOBS_PER_PAGE)
    query.jobsPerPage = String(MAX_JOBS_PER_PAGE);
}

/** bull-board on `queues`, each job's data, result and name through our formatters. */
function createBoard(queues: readonly Queue[], basePath: string): FastifyAdapter {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(basePath);
  const adapters = queues.map((queue) => {
    const options: Partial<QueueAdapterOptions> & { allowCompletedRetries: boolean } = {
      allowRetries: true,
      // Retrying a completed job is how an operator replays an event on purpose; the receipt keeps it single.
      allowCompletedRetries: true,
      description: 'Replay is safe: an applied (OrderNo, state) is never credited twice.',
    };
    const adapter = new FreshRetryBullMQAdapter(queue, options);
    adapter.setFormatter('data', formatJobData);
    adapter.setFormatter('returnValue', formatReturnValue);
    adapter.setFormatter('name', formatJobName);
    return adapter;
  });
  createBullBoard({
    queues: adapters,
    serverAdapter,
    // showWorkers off: the workers' list is Redis's CLIENT LIST (addresses and names of every connection).
    options: {
      uiConfig: {
        boardTitle: 'Callbacks',
        hideRedisDetails: true,
        showWorkers: false,
        miscLinks: [{ text: 'Console', url: '/search' }],
      },
    },
  });
  return serverAdapter;
}

/**
 * The onRequest hook: deny by default what is not on the allow-list, then check the role and the reason of an
 * action and write its intent row before bull-board acts. Refusals are sent from the hook: bull-board's own error
 * handler would turn a thrown error into a 500.
 */
function checkAction(
  actions: ActionDeps,
  patternOf: (req: FastifyRequest) => string,
  merchantOf: (queueName: string) => string | null,
) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const pattern = patternOf(req);
    const params = (req.params ?? {}) as Record<string, unknown>;
    // A queue outside the operator's merchants is not served (a read answers as a queue that does not exist); an
    // action on it is the action layer's 403 with its `denied` row, below. By the matched route's decoded parameter,
    // so that every spelling of the path (percent-encoded, another case) is judged by the name it reaches.
    const queueMerchant = typeof params.queueName === 'string' ? merchantOf(params.queueName) : undefined;
    const reading = req.method === 'GET' || req.method === 'HEAD';
    if (reading && queueMerchant !== undefined && req.operator && !inScope(req.operator, queueMerchant)) {
      return reply.code(404).send({ code: ErrorCodes.NOT_FOUND, message: 'no such queue', requestId: req.id });
    }
    // Deny by default: any method but GET/HEAD on a route not on the allow-list, for every role.
    if (!isAllowedDashboardAction(req.method, pattern)) {
      req.log.warn({ method: req.method, route: pattern }, 'dashboard action refused');
      return reply.code(403).send({
        code: ErrorCodes.FORBIDDEN,
        message:
          pattern === RETRY_ALL_ROUTE
            ? RETRY_ALL_REFUSED
            : 'this dashboard action is disabled for every role: only retry of one job and promote are allowed',
        requestId: req.id,
      });
    }
    const action = dashboardActionOf(req.method, pattern, params);
    if (!action) {
      if (req.method === 'GET' || req.method === 'HEAD') return;
      // An allowed route with no action of ours would be an allow-list bug: refuse rather than act unrecorded.
      return reply.code(403).send({
        code: ErrorCodes.FORBIDDEN,
        message: 'this dashboard action is not recorded, so it is refused',
        requestId: req.id,
      });
    }
    let auth: Authorized;
    try {
      const merchant = queueMerchant ?? null;
      auth = await authorize(actions, actorOf(req), { ...action, reason: reasonHeader(req), merchant });
    } catch (e) {
      if (isAppError(e, ErrorCodes.FORBIDDEN)) return sendError(req, reply, e, 403);
      if (isAppError(e, ErrorCodes.REASON_REQUIRED) || isAppError(e, ErrorCodes.REQUEST_INVALID))
        return sendError(req, reply, e, 400);
      throw e;
    }
    // The effect is bull-board's, in Redis, outside our transactions: its audit row is written first, as an intent.
    // No row, no effect.
    try {
      req.dashboardAction = { ...auth, intentId: await recordIntent(actions, auth) };
    } catch (e) {
      req.log.error(
        { err: coerceError(e), action: action.action },
        'audit row of a dashboard action not written: action refused',
      );
      return reply.code(503).header('retry-after', '5').send({
        code: ErrorCodes.DB_UNAVAILABLE,
        message: 'the audit row of this action could not be written, so nothing was done; retry later',
        requestId: req.id,
      });
    }
  };
}

/** The onResponse hook: bull-board's answer decides the outcome, which completes the intent row. */
function completeAction(actions: ActionDeps) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const auth = req.dashboardAction;
    if (!auth) return;
    const outcome = reply.statusCode < 400 ? 'done' : `failed:HTTP ${reply.statusCode}`;
    if (reply.statusCode < 400) {
      await completeIntent(actions.db, auth.intentId, outcome).catch((e: unknown) =>
        req.log.error(
          { err: coerceError(e), action: auth.spec.action, intentId: auth.intentId },
          'audit row of a dashboard action not completed',
        ),
      );
    } else {
      await completeIntentFailed(actions, auth, auth.intentId, outcome);
    }
    req.log.info(
      { action: auth.spec.action, target: auth.spec.target, operator: auth.actor.operator.name, outcome },
      'operator action',
    );
  };
}

/**
 * The onSend hook: the board's list of queues keeps the operator's merchants' only (a scoped operator is not told the
 * others exist). Every other read of a queue is refused by name in {@link checkAction}.
 */
function onlyQueuesInScope(
  patternOf: (req: FastifyRequest) => string,
  merchantOf: (queueName: string) => string | null,
) {
  return async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (typeof payload !== 'string' || !req.operator?.scope || patternOf(req) !== '/api/queues') return payload;
    if (!String(reply.getHeader('content-type') ?? '').includes('json')) return payload;
    const operator = req.operator;
    const body = JSON.parse(payload) as { queues?: { name?: string }[] };
    body.queues = (body.queues ?? []).filter((q) => inScope(operator, merchantOf(String(q.name ?? ''))));
    return JSON.stringify(body);
  };
}

/**
 * The onSend hook: viewers get a read-only board (bull-board then offers no action) without stack traces, and every
 * page loads board-guard.js.
 */
function readOnlyForViewers(patternOf: (req: FastifyRequest) => string) {
  return async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (typeof payload !== 'string') return payload;
    const type = String(reply.getHeader('content-type') ?? '');
    if (type.startsWith('text/html')) {
      const role = req.operator?.role ?? 'viewer';
      return payload
        .replace(/<link[^>]+fonts\.googleapis\.com[^>]*>/g, '')
        .replace('</head>', `<script src="/assets/board-guard.js" data-role="${role}"></script></head>`);
    }
    if (req.method !== 'GET' || !type.includes('json') || req.operator?.role !== 'viewer') return payload;
    const body = JSON.parse(payload) as Record<string, unknown>;
    if (patternOf(req) === '/api/queues') {
      for (const q of (body.queues ?? []) as { readOnlyMode?: boolean; jobs?: unknown[] }[]) {
        q.readOnlyMode = true;
        for (const job of q.jobs ?? []) withoutStacktrace(job);
      }
    }
    if (body.job) withoutStacktrace(body.job);
    return JSON.stringify(body);
  };
}
