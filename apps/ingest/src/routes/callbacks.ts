import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { redisTargetOf, type BatchDurabilityCheck, type RedisClient } from '@mcb/core/redis';
import { decodeCallbackDetailed, type KeyRing } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { coerceError, ErrorCodes, isAppError, type ErrorCode } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { CallbackKind } from '@mcb/core/queue';
import { inSpan, inSpanSync, orderAttributes, type Span } from '@mcb/core/tracing';
import { createEnqueuer } from '../enqueue.ts';
import type { IngestMetrics } from '../metrics.ts';
import { createSentinelFence } from '../primary-fence.ts';
import { CONTENT_FAILURE_STATUS, sendText, UNAVAILABLE_STATUS } from '../reply.ts';

/** The routes of DESIGN.md and the kind each expects (`undefined`: read from the record). */
export const CALLBACK_ROUTES: Readonly<Record<string, CallbackKind | undefined>> = {
  '/callbacks': undefined,
  '/callbacks/payin': 'payin',
  '/callbacks/payout': 'payout',
};

/** Why Redis may not take callbacks now (each a code of the error catalogue, answered 503). */
export type RedisRefusal =
  typeof ErrorCodes.REDIS_NOT_DURABLE | typeof ErrorCodes.REDIS_MEMORY_LOW | typeof ErrorCodes.REDIS_REPLICAS_OFFLINE;

/** What the callback routes need. */
export interface CallbackRouteDeps {
  config: Config;
  queue: Queue;
  redis: RedisClient;
  logger: Logger;
  keyRing: KeyRing;
  metrics: IngestMetrics;
  /**
   * Whether Redis may take callbacks now as last read (durable, or volatile allowed; memory headroom left), why not,
   * and how each batch proves that Redis keeps it (the batch's own check, whatever was last read).
   */
  durability: () => {
    acceptWrites: boolean;
    check: BatchDurabilityCheck;
    refusal: RedisRefusal;
  };
  /** Told when a batch found that Redis no longer keeps it: re-read durability now. */
  onNotDurable?: (problems: string[]) => void;
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
  let lastRefusalLog = 0;
  let refusedSinceLog = 0;
  // Requests that arrive together are stored together: one transaction per batch, proven kept by the batch itself
  // (WAITAOF after it, or the durability settings read inside it).
  // Through Sentinel, a batch is acknowledged only while the sentinels still name the node it went to (a stale primary's
  // writes would be dropped when it is demoted).
  const target = redisTargetOf(config);
  const fence =
    target.kind === 'sentinel'
      ? createSentinelFence(deps.redis as Redis, target, { timeoutMs: deps.enqueueTimeoutMs })
      : undefined;
  if (fence) app.addHook('onClose', async () => fence.close());
  const enqueuer = createEnqueuer(deps.queue, deps.redis, {
    fence,
    timeoutMs: deps.enqueueTimeoutMs,
    minReplicas: deps.config.INGEST_MIN_REPLICAS,
    attempts: deps.config.CALLBACK_JOB_ATTEMPTS,
    onBatch: (size) => metrics.enqueueBatchSize.observe(size),
    onNotDurable: deps.onNotDurable,
  });

  async function handle(
    request: FastifyRequest,
    reply: FastifyReply,
    route: string,
    expectedKind: CallbackKind | undefined,
    span: Span | undefined,
  ) {
    const started = process.hrtime.bigint();
    const done = (outcome: string, status: number, body: 'success' | 'fail', code: ErrorCode | '' = '') => {
      metrics.requests.inc({ route, outcome, code });
      metrics.latency.observe({ route, outcome }, Number(process.hrtime.bigint() - started) / 1e9);
      span?.setAttributes({
        'mcb.outcome': outcome,
        'http.response.status_code': status,
        ...(code ? { 'error.code': code } : {}),
      });
      return sendText(reply, status, body);
    };

    let decoded;
    try {
      // The decrypt span says how many blocks and which key, never what they held.
      decoded = inSpanSync('callback decrypt', {}, (decryptSpan) => {
        const d = decodeCallbackDetailed(parseBody(request.body), {
          keyRing: deps.keyRing,
          merchantNo: config.MERCHANT_NO ?? '',
          expectedKind,
          maxBlocks: config.INGEST_MAX_BLOCKS,
        });
        decryptSpan?.setAttribute('mcb.key_index', d.keyIndex);
        return d;
      });
    } catch (e) {
      if (!isAppError(e)) throw e; // a bug, not bad input: the error boundary replies 500 fail and logs it
      // Details hold order numbers and states at most; the message never quotes the body.
      logger.warn({ route, reqId: request.id, code: e.code, reason: e.message, ...e.details }, 'callback refused');
      return done('refused', CONTENT_FAILURE_STATUS, 'fail', e.code);
    }
    const { job, keyIndex } = decoded;
    metrics.keyUsed.inc({ key_index: String(keyIndex) });
    const ids = {
      route,
      reqId: request.id,
      kind: job.kind,
      orderNo: job.orderNo,
      merchantOrderNo: job.merchantOrderNo,
      state: job.state,
    };
    span?.setAttributes(orderAttributes(job));

    const durability = deps.durability();
    if (!durability.acceptWrites) {
      metrics.enqueueFailures.inc();
      // A flood must not become a log flood: one line per 10 s with the count refused meanwhile.
      refusedSinceLog++;
      if (Date.now() - lastRefusalLog >= 10_000) {
        logger.error(
          { ...ids, outcome: 'unavailable', code: durability.refusal, refusedSinceLastLine: refusedSinceLog },
          durability.refusal === ErrorCodes.REDIS_MEMORY_LOW
            ? 'callbacks not acknowledged: Redis memory headroom is low (see readyz); the platform retries'
            : durability.refusal === ErrorCodes.REDIS_REPLICAS_OFFLINE
              ? 'callbacks not acknowledged: fewer Redis replicas online than INGEST_MIN_REPLICAS (see readyz); the platform retries'
              : 'callbacks not acknowledged: Redis is not durable now (see readyz)',
        );
        lastRefusalLog = Date.now();
        refusedSinceLog = 0;
      }
      return done('unavailable', UNAVAILABLE_STATUS, 'fail', durability.refusal);
    }
    try {
      const jobId = await inSpan('callback enqueue', {}, async (enqueueSpan) => {
        const id = await enqueuer.enqueue(job, { check: durability.check });
        enqueueSpan?.setAttribute('mcb.job_id', id);
        return id;
      });
      // debug, not info: a line per callback is a hot path's cost (pino's redaction and serialisation), and each one
      // is counted (ingest_callbacks_total), stored as its job and shown by the console's search.
      logger.debug({ ...ids, jobId, keyIndex, outcome: 'enqueued' }, 'callback accepted');
      return done('success', 200, 'success');
    } catch (e) {
      metrics.enqueueFailures.inc();
      const err = coerceError(e);
      logger.error(
        { ...ids, outcome: 'enqueue-failed', err: err.cause ?? err },
        'callback not acknowledged: enqueue failed',
      );
      return done('unavailable', UNAVAILABLE_STATUS, 'fail', isAppError(e) ? e.code : ErrorCodes.ENQUEUE_FAILED);
    }
  }

  for (const [route, kind] of Object.entries(CALLBACK_ROUTES)) {
    // One trace per callback starts here (a SERVER span); without tracing, inSpan calls straight through.
    app.post(route, (request, reply) =>
      inSpan('callback receive', { 'http.route': route }, (span) => handle(request, reply, route, kind, span)),
    );
  }
}
