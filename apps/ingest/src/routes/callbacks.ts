import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { decodeCallbackDetailed, type KeyRing } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { coerceError, isAppError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { CallbackKind } from '@mcb/core/queue';
import { enqueueCallback } from '../enqueue.ts';
import type { IngestMetrics } from '../metrics.ts';
import { CONTENT_FAILURE_STATUS, sendText, UNAVAILABLE_STATUS } from '../reply.ts';

/** The routes of DESIGN.md and the kind each expects (`undefined`: read from the record). */
export const CALLBACK_ROUTES: Readonly<Record<string, CallbackKind | undefined>> = {
  '/callbacks': undefined,
  '/callbacks/payin': 'payin',
  '/callbacks/payout': 'payout',
};

/** What the callback routes need. */
export interface CallbackRouteDeps {
  config: Config;
  queue: Queue;
  redis: Redis;
  logger: Logger;
  keyRing: KeyRing;
  metrics: IngestMetrics;
  /** Whether the last durability check allows acknowledging, and whether each add needs WAITAOF. */
  durability: () => { acceptWrites: boolean; waitAof: boolean };
  /** Budget of one enqueue, in ms. */
  enqueueTimeoutMs: number;
}

/** Parse the outer body; the raw string comes from our content-type parser so that every failure is ours to shape. */
function parseBody(raw: unknown): unknown {
  if (typeof raw !== 'string') return undefined;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

export function registerCallbackRoutes(app: FastifyInstance, deps: CallbackRouteDeps): void {
  const { config, logger, metrics } = deps;

  async function handle(request: FastifyRequest, reply: FastifyReply, route: string, expectedKind: CallbackKind | undefined) {
    const started = process.hrtime.bigint();
    const done = (outcome: string, status: number, body: 'success' | 'fail', code = '') => {
      metrics.requests.inc({ route, outcome, code });
      metrics.latency.observe({ route, outcome }, Number(process.hrtime.bigint() - started) / 1e9);
      return sendText(reply, status, body);
    };

    let decoded;
    try {
      decoded = decodeCallbackDetailed(parseBody(request.body), { keyRing: deps.keyRing, merchantNo: config.MERCHANT_NO ?? '', expectedKind });
    } catch (e) {
      if (!isAppError(e)) throw e; // a bug, not bad input: the error boundary replies 500 fail and logs it
      // Details hold order numbers and states at most; the message never quotes the body.
      logger.warn({ route, reqId: request.id, code: e.code, reason: e.message, ...e.details }, 'callback refused');
      return done('refused', CONTENT_FAILURE_STATUS, 'fail', e.code);
    }
    const { job, keyIndex } = decoded;
    metrics.keyUsed.inc({ key_index: String(keyIndex) });
    const ids = { route, reqId: request.id, kind: job.kind, orderNo: job.orderNo, merchantOrderNo: job.merchantOrderNo, state: job.state };

    const durability = deps.durability();
    if (!durability.acceptWrites) {
      metrics.enqueueFailures.inc();
      logger.error({ ...ids, outcome: 'not-durable' }, 'callback not acknowledged: Redis is not durable now (see readyz)');
      return done('unavailable', UNAVAILABLE_STATUS, 'fail', 'REDIS_NOT_DURABLE');
    }
    try {
      const jobId = await enqueueCallback(deps.queue, deps.redis, job, { waitAof: durability.waitAof, timeoutMs: deps.enqueueTimeoutMs });
      logger.info({ ...ids, jobId, keyIndex, outcome: 'enqueued' }, 'callback accepted');
      return done('success', 200, 'success');
    } catch (e) {
      metrics.enqueueFailures.inc();
      const err = coerceError(e);
      logger.error({ ...ids, outcome: 'enqueue-failed', err: err.cause ?? err }, 'callback not acknowledged: enqueue failed');
      return done('unavailable', UNAVAILABLE_STATUS, 'fail', isAppError(e) ? e.code : 'ENQUEUE_FAILED');
    }
  }

  for (const [route, kind] of Object.entries(CALLBACK_ROUTES)) {
    app.post(route, (request, reply) => handle(request, reply, route, kind));
  }
}
