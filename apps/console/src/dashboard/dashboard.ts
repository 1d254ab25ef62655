import { createBullBoard } from '@bull-board/api';
import type { QueueAdapterOptions } from '@bull-board/api/typings/app';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { ErrorCodes } from '@mcb/core/errors';
import type { Queue } from 'bullmq';
import type { FastifyPluginAsync } from 'fastify';
import { isAllowedDashboardAction } from './action-guard.ts';
import { formatJobData, formatReturnValue } from './job-formatter.ts';

/** Options of {@link dashboardPlugin}. */
export interface DashboardOptions {
  /** The queues to show: the callbacks queue (and the maintenance queue when there is one). */
  queues: Queue[];
  /** Where the dashboard lives. @defaultValue '/queues' */
  basePath?: string;
}

/**
 * bull-board at `/queues`: inspect jobs (data through {@link formatJobData}), failure reasons and attempts;
 * retry one job, retry all failed, promote delayed jobs. Authentication and the CSRF check come from the root
 * auth hook; this plugin adds the action allow-list (action-guard.ts) and an audit line per action.
 */
export const dashboardPlugin: FastifyPluginAsync<DashboardOptions> = async (app, opts) => {
  const basePath = opts.basePath ?? '/queues';
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(basePath);
  const adapters = opts.queues.map((queue) => {
    const options: Partial<QueueAdapterOptions> & { allowCompletedRetries: boolean } = {
      allowRetries: true,
      // Retrying a completed job is how an operator replays an event on purpose; the receipt keeps it single.
      allowCompletedRetries: true,
      description: 'Replay is safe: an applied (OrderNo, state) is never credited twice.',
    };
    const adapter = new BullMQAdapter(queue, options);
    adapter.setFormatter('data', formatJobData);
    adapter.setFormatter('returnValue', formatReturnValue);
    return adapter;
  });
  createBullBoard({
    queues: adapters,
    serverAdapter,
    options: { uiConfig: { boardTitle: 'Callbacks', hideRedisDetails: true } },
  });

  app.addHook('onRequest', async (req, reply) => {
    const pattern = (req.routeOptions.url ?? '').slice(basePath.length);
    const params = (req.params ?? {}) as Record<string, unknown>;
    if (!isAllowedDashboardAction(req.method, pattern, params)) {
      req.log.warn({ method: req.method, route: pattern }, 'dashboard action refused');
      return reply.code(403).send({
        code: ErrorCodes.FORBIDDEN,
        message: 'this dashboard action is disabled: only retry and promote are allowed',
        requestId: req.id,
      });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      req.log.info({ action: pattern, queue: params.queueName, jobId: params.jobId, status: params.queueStatus, auth: req.authMethod }, 'dashboard action');
    }
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: basePath });
};
