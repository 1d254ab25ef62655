import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { redisTargetOf, type BatchDurabilityCheck, type RedisClient } from '@mcb/core/redis';
import { decodeCallbackDetailed, type DecodedCallback, type KeyRing } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { coerceError, ErrorCodes, isAppError, type ErrorCode } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { CallbackJobInput, CallbackKind } from '@mcb/core/queue';
import { inSpan, inSpanSync, orderAttributes, type Span } from '@mcb/core/tracing';
import { createEnqueuer, type Enqueuer } from '../enqueue.ts';
import type { IngestMetrics } from '../metrics.ts';
import { createSentinelFence } from '../primary-fence.ts';
import type { RedisGate, RedisRefusal } from '../redis-gate.ts';
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
  redis: RedisClient;
  logger: Logger;
  keyRing: KeyRing;
  metrics: IngestMetrics;
  /**
   * Whether Redis may take callbacks now as last read (durable, or volatile allowed; replicas; memory headroom), why
   * not, and how each batch proves that Redis keeps it; told when a batch found that Redis no longer keeps it.
   */
  gate: Pick<RedisGate, 'accept' | 'noteRefusal' | 'onNotDurable'>;
  /** Budget of one enqueue, in ms. */
  enqueueTimeoutMs: number;
}

/** What one callback's handling uses, made once for the routes. */
interface Handling extends CallbackRouteDeps {
  enqueuer: Enqueuer;
}

/** The log fields that name a callback: never its body, only its route, request, ids and state. */
type CallbackIds = { route: string; reqId: string } & Pick<
  CallbackJobInput,
  'kind' | 'orderNo' | 'merchantOrderNo' | 'state'
>;

function idsOf(route: string, request: FastifyRequest, job: CallbackJobInput): CallbackIds {
  return {
    route,
    reqId: request.id,
    kind: job.kind,
    orderNo: job.orderNo,
    merchantOrderNo: job.merchantOrderNo,
    state: job.state,
  };
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

/** POST on each of {@link CALLBACK_ROUTES}; one trace per callback starts there. */
export function registerCallbackRoutes(app: FastifyInstance, deps: CallbackRouteDeps): void {
  const h: Handling = { ...deps, enqueuer: createDurableEnqueuer(app, deps) };
  for (const [route, kind] of Object.entries(CALLBACK_ROUTES)) {
    // One trace per callback starts here (a SERVER span); without tracing, inSpan calls straight through.
    app.post(route, (request, reply) =>
      inSpan('callback receive', { 'http.route': route }, (span) =>
        handleCallback(h, request, reply, route, kind, span),
      ),
    );
  }
}

/**
 * One callback, as the spec has it: decrypt, check it is ours (the merchant number, the route's kind), store it
 * durably, reply `success`. Any refusal or failure replies `fail`; only a stored job is ever acknowledged.
 */
async function handleCallback(
  h: Handling,
  request: FastifyRequest,
  reply: FastifyReply,
  route: string,
  expectedKind: CallbackKind | undefined,
  span: Span | undefined,
) {
  const done = replier(h.metrics, reply, route, span);
  const opened = decryptAndCheck(h, request, route, expectedKind);
  if ('refused' in opened) return done('refused', CONTENT_FAILURE_STATUS, 'fail', opened.refused);
  const { job, keyIndex } = opened;
  const ids = idsOf(route, request, job);
  span?.setAttributes(orderAttributes(job));
  const redis = h.gate.accept();
  if (!redis.acceptWrites) return done('unavailable', UNAVAILABLE_STATUS, 'fail', refuse(h, ids, redis.refusal));
  const failed = await enqueueDurably(h, job, redis.check, ids, keyIndex);
  if (failed) return done('unavailable', UNAVAILABLE_STATUS, 'fail', failed);
  return done('success', 200, 'success');
}

/**
 * Requests that arrive together are stored together: one transaction per batch, proven kept by the batch itself
 * (WAITAOF after it, or the durability settings read inside it). Through Sentinel, a batch is acknowledged only
 * while the sentinels still name the node it went to (a stale primary's writes would be dropped when it is demoted).
 */
function createDurableEnqueuer(app: FastifyInstance, deps: CallbackRouteDeps): Enqueuer {
  const target = redisTargetOf(deps.config);
  const fence =
    target.kind === 'sentinel'
      ? createSentinelFence(deps.redis as Redis, target, { timeoutMs: deps.enqueueTimeoutMs })
      : undefined;
  if (fence) app.addHook('onClose', async () => fence.close());
  return createEnqueuer(deps.queue, deps.redis, {
    fence,
    timeoutMs: deps.enqueueTimeoutMs,
    minReplicas: deps.config.INGEST_MIN_REPLICAS,
    attempts: deps.config.CALLBACK_JOB_ATTEMPTS,
    onBatch: (size) => deps.metrics.enqueueBatchSize.observe(size),
    onNotDurable: (problems) => deps.gate.onNotDurable(problems),
  });
}

/** The reply of one callback, counted, timed and put on its span. */
function replier(metrics: IngestMetrics, reply: FastifyReply, route: string, span: Span | undefined) {
  const started = process.hrtime.bigint();
  return (outcome: string, status: number, body: 'success' | 'fail', code: ErrorCode | '' = '') => {
    metrics.requests.inc({ route, outcome, code });
    metrics.latency.observe({ route, outcome }, Number(process.hrtime.bigint() - started) / 1e9);
    span?.setAttributes({
      'mcb.outcome': outcome,
      'http.response.status_code': status,
      ...(code ? { 'error.code': code } : {}),
    });
    return sendText(reply, status, body);
  };
}

/**
 * Decrypt, and check the record is ours: the codec refuses a wrong merchant number or kind like any other content
 * failure (one code each, logged; the same reply for all). A throw that is not an AppError is a bug, not bad input:
 * it reaches the error boundary, which replies 500 fail and logs it.
 */
function decryptAndCheck(
  h: Handling,
  request: FastifyRequest,
  route: string,
  expectedKind: CallbackKind | undefined,
): DecodedCallback | { refused: ErrorCode } {
  let decoded: DecodedCallback;
  try {
    // The decrypt span says how many blocks and which key, never what they held.
    decoded = inSpanSync('callback decrypt', {}, (decryptSpan) => {
      const d = decodeCallbackDetailed(parseBody(request.body), {
        keyRing: h.keyRing,
        merchantNo: h.config.MERCHANT_NO ?? '',
        expectedKind,
        maxBlocks: h.config.INGEST_MAX_BLOCKS,
      });
      decryptSpan?.setAttribute('mcb.key_index', d.keyIndex);
      return d;
    });
  } catch (e) {
    if (!isAppError(e)) throw e;
    // Details hold order numbers and states at most; the message never quotes the body.
    h.logger.warn({ route, reqId: request.id, code: e.code, reason: e.message, ...e.details }, 'callback refused');
    return { refused: e.code };
  }
  h.metrics.keyUsed.inc({ key_index: String(decoded.keyIndex) });
  return decoded;
}

/** Refused by the Redis gate (not durable, replicas offline, memory low): counted, logged without a flood. */
function refuse(h: Handling, ids: CallbackIds, refusal: RedisRefusal): RedisRefusal {
  h.metrics.enqueueFailures.inc();
  h.gate.noteRefusal(ids, refusal);
  return refusal;
}

/** Store the job durably (its batch proven kept); the failure's code, or undefined once it is stored. */
async function enqueueDurably(
  h: Handling,
  job: CallbackJobInput,
  check: BatchDurabilityCheck,
  ids: CallbackIds,
  keyIndex: number,
): Promise<ErrorCode | undefined> {
  try {
    const jobId = await inSpan('callback enqueue', {}, async (enqueueSpan) => {
      const id = await h.enqueuer.enqueue(job, { check });
      enqueueSpan?.setAttribute('mcb.job_id', id);
      return id;
    });
    // debug, not info: a line per callback is a hot path's cost (pino's redaction and serialisation), and each one
    // is counted (ingest_callbacks_total), stored as its job and shown by the console's search.
    h.logger.debug({ ...ids, jobId, keyIndex, outcome: 'enqueued' }, 'callback accepted');
    return undefined;
  } catch (e) {
    h.metrics.enqueueFailures.inc();
    const err = coerceError(e);
    h.logger.error(
      { ...ids, outcome: 'enqueue-failed', err: err.cause ?? err },
      'callback not acknowledged: enqueue failed',
    );
    return isAppError(e) ? e.code : ErrorCodes.ENQUEUE_FAILED;
  }
}
