import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { redisTargetOf, type BatchDurabilityCheck, type RedisClient } from '@mcb/core/redis';
import { decodeCallbackDetailed, type DecodedCallback, type KeyRing } from '@mcb/core/callback';
import type { Config } from '@mcb/core/config';
import { AppError, coerceError, ErrorCodes, isAppError, type ErrorCode } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { CallbackJobInput, CallbackKind } from '@mcb/core/queue';
import { inSpan, inSpanSync, orderAttributes, type Span } from '@mcb/core/tracing';
import { createEnqueuer, type Enqueuer } from '../enqueue.ts';
import type { IngestLane } from '../lanes.ts';
import type { IngestMetrics } from '../metrics.ts';
import { createSentinelFence } from '../primary-fence.ts';
import type { PausedBound } from '../paused-bound.ts';
import type { RedisGate, RedisRefusal } from '../redis-gate.ts';
import { CONTENT_FAILURE_STATUS, sendText, UNAVAILABLE_STATUS } from '../reply.ts';
import { CALLBACK_ROUTES, MERCHANT_CALLBACK_ROUTES, routeTargets, type RouteTarget } from './route-targets.ts';

export { ALL_CALLBACK_ROUTES, CALLBACK_ROUTES, isCallbackPath, MERCHANT_CALLBACK_ROUTES } from './route-targets.ts';

/** What the callback routes need. */
export interface CallbackRouteDeps {
  config: Config;
  /** Each merchant's lane: its key ring and its queue. */
  lanes: readonly IngestLane[];
  /** The ring a callback to no merchant is opened with before it is refused (see decoyKeyRing). */
  decoyKeyRing: KeyRing;
  /** The connection every lane's queue uses. */
  redis: RedisClient;
  logger: Logger;
  metrics: IngestMetrics;
  /**
   * Whether Redis may take callbacks now as last read (durable, or volatile allowed; replicas; memory headroom), why
   * not, and how each batch proves that Redis keeps it; told when a batch found that Redis no longer keeps it.
   */
  gate: Pick<RedisGate, 'accept' | 'noteRefusal' | 'onNotDurable'>;
  /** Budget of one enqueue, in ms. */
  enqueueTimeoutMs: number;
  /** A paused merchant's backlog bound (MERCHANT_PAUSED_MAX_BACKLOG). @defaultValue none: never refused */
  pausedBound?: PausedBound;
}

/** What one callback's handling uses, made once for the routes. */
interface Handling extends CallbackRouteDeps {
  enqueuer: Enqueuer;
}

/** The log fields that name a callback: never its body, only its route, merchant, request, ids and state. */
type CallbackIds = { route: string; merchant: string; reqId: string } & Pick<
  CallbackJobInput,
  'kind' | 'orderNo' | 'merchantOrderNo' | 'state'
>;

function idsOf(route: string, lane: IngestLane, request: FastifyRequest, job: CallbackJobInput): CallbackIds {
  return {
    route,
    merchant: lane.merchant.ref,
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

/**
 * POST on each of {@link CALLBACK_ROUTES} (the `legacyRoutes` merchant's) and {@link MERCHANT_CALLBACK_ROUTES} (the
 * merchant the ref names, one Map look-up); one trace per callback starts there. A route no merchant serves answers
 * exactly as a wrong key does.
 */
export function registerCallbackRoutes(app: FastifyInstance, deps: CallbackRouteDeps): void {
  const h: Handling = { ...deps, enqueuer: createDurableEnqueuer(app, deps) };
  const targets = routeTargets(deps.lanes, deps.decoyKeyRing);
  countFromZero(deps.metrics, deps.lanes, targets.legacy);
  for (const [route, kind] of Object.entries(CALLBACK_ROUTES)) {
    // One trace per callback starts here (a SERVER span); without tracing, inSpan calls straight through.
    app.post(route, (request, reply) =>
      inSpan('callback receive', { 'http.route': route }, (span) =>
        handleCallback(h, request, reply, { route, kind, target: targets.legacy }, span),
      ),
    );
  }
  for (const [route, kind] of Object.entries(MERCHANT_CALLBACK_ROUTES)) {
    app.post<{ Params: { ref: string } }>(route, (request, reply) =>
      inSpan('callback receive', { 'http.route': route }, (span) =>
        handleCallback(h, request, reply, { route, kind, target: targets.of(request.params.ref) }, span),
      ),
    );
  }
}

/**
 * Each merchant's acknowledged callbacks on each of its routes, at 0 from the start. A series that appears at 1 has no
 * sample before it, so `increase()` leaves out the callback that made it: a merchant whose first callback after an
 * ingest restart is its only one in a quarter of an hour would not show in NoCreditsWhileCallbacksArrive.
 */
function countFromZero(metrics: IngestMetrics, lanes: readonly IngestLane[], legacy: RouteTarget): void {
  const zero = (route: string, merchant: string) =>
    metrics.requests.inc({ route, outcome: 'success', code: '', merchant }, 0);
  for (const lane of lanes) for (const route of Object.keys(MERCHANT_CALLBACK_ROUTES)) zero(route, lane.merchant.ref);
  if (legacy.lane) for (const route of Object.keys(CALLBACK_ROUTES)) zero(route, legacy.label);
}

/** The route a callback came in on: its pattern, the kind it expects (`undefined`: read from the record), its merchant. */
interface Arrival {
  route: string;
  kind: CallbackKind | undefined;
  target: RouteTarget;
}

/**
 * One callback, as the spec has it: decrypt with the route's merchant's ring, check it is that merchant's (its
 * number, the route's kind), store it durably in that merchant's queue, reply `success`. Any refusal or failure
 * replies `fail`; only a stored job is ever acknowledged.
 */
async function handleCallback(
  h: Handling,
  request: FastifyRequest,
  reply: FastifyReply,
  arrival: Arrival,
  span: Span | undefined,
) {
  const { route, target } = arrival;
  const done = replier(h.metrics, reply, route, target.label, span);
  const opened = decryptAndCheck(h, request, arrival);
  if ('refused' in opened) return done('refused', CONTENT_FAILURE_STATUS, 'fail', opened.refused);
  const { job, keyIndex, lane } = opened;
  const ids = idsOf(route, lane, request, job);
  span?.setAttributes({ ...orderAttributes(job), 'mcb.merchant': lane.merchant.ref });
  const redis = h.gate.accept();
  if (!redis.acceptWrites)
    return done('unavailable', UNAVAILABLE_STATUS, 'fail', refuse(h, target, ids, redis.refusal));
  // Checked once the callback proved to be this merchant's: an outsider learns nothing of a pause.
  if (await h.pausedBound?.refuses(lane.merchant.ref)) {
    h.logger.debug(ids, 'callback refused: its merchant is paused and its backlog is full');
    return done('unavailable', UNAVAILABLE_STATUS, 'fail', ErrorCodes.MERCHANT_BACKLOG_FULL);
  }
  const failed = await enqueueDurably(h, { job, lane, label: target.label }, redis.check, ids, keyIndex);
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
  // One enqueuer for every merchant: a batch holds whichever callbacks arrived together, each bound for its own queue.
  return createEnqueuer(deps.lanes[0]!.queue, deps.redis, {
    fence,
    timeoutMs: deps.enqueueTimeoutMs,
    minReplicas: deps.config.INGEST_MIN_REPLICAS,
    attempts: deps.config.CALLBACK_JOB_ATTEMPTS,
    onBatch: (size) => deps.metrics.enqueueBatchSize.observe(size),
    onNotDurable: (problems) => deps.gate.onNotDurable(problems),
  });
}

/** The reply of one callback, counted (under its merchant's label), timed and put on its span. */
function replier(metrics: IngestMetrics, reply: FastifyReply, route: string, merchant: string, span: Span | undefined) {
  const started = process.hrtime.bigint();
  return (outcome: string, status: number, body: 'success' | 'fail', code: ErrorCode | '' = '') => {
    metrics.requests.inc({ route, outcome, code, merchant });
    metrics.latency.observe({ route, outcome, merchant }, Number(process.hrtime.bigint() - started) / 1e9);
    span?.setAttributes({
      'mcb.outcome': outcome,
      'http.response.status_code': status,
      ...(code ? { 'error.code': code } : {}),
    });
    return sendText(reply, status, body);
  };
}

/**
 * Decrypt with the route's merchant's ring, and check the record is that merchant's: the codec refuses a wrong
 * merchant number or kind like any other content failure (one code each, logged; the same reply for all). A route
 * no merchant serves does the same work with the decoy ring and is then refused, whatever it opened: its reply and
 * its time are a wrong key's. A throw that is not an AppError is a bug, not bad input: it reaches the error boundary,
 * which replies 500 fail and logs it.
 */
function decryptAndCheck(
  h: Handling,
  request: FastifyRequest,
  { route, kind, target }: Arrival,
): (DecodedCallback & { lane: IngestLane }) | { refused: ErrorCode } {
  const lane = target.lane;
  let decoded: DecodedCallback;
  try {
    // The decrypt span says how many blocks and which key, never what they held.
    decoded = inSpanSync('callback decrypt', {}, (decryptSpan) => {
      const d = decodeCallbackDetailed(parseBody(request.body), {
        keyRing: target.keyRing,
        merchantNo: lane?.merchant.merchantNo ?? '',
        expectedKind: kind,
        maxBlocks: h.config.INGEST_MAX_BLOCKS,
      });
      decryptSpan?.setAttribute('mcb.key_index', d.keyIndex);
      return d;
    });
    if (!lane) throw noMerchant();
  } catch (e) {
    if (!isAppError(e)) throw e;
    const refusal = lane ? e : noMerchant();
    // Details hold order numbers and states at most; the message never quotes the body. An unknown ref is an
    // outsider's guess: logged cut short, never a metric label.
    const who = lane ? { merchant: lane.merchant.ref } : { ref: refOf(request) };
    h.logger.warn(
      { route, ...who, reqId: request.id, code: refusal.code, reason: refusal.message, ...refusal.details },
      'callback refused',
    );
    return { refused: refusal.code };
  }
  h.metrics.keyUsed.inc({ key_index: String(decoded.keyIndex), merchant: target.label });
  return { ...decoded, lane };
}

/** The refusal of a callback to a route no merchant serves: the merchant check failed. */
function noMerchant(): AppError {
  return new AppError(ErrorCodes.CALLBACK_MERCHANT_MISMATCH, 'no merchant is served at this route');
}

/** The ref a request named, cut short for a log line (undefined on the legacy routes). */
function refOf(request: FastifyRequest): string | undefined {
  const ref = (request.params as { ref?: unknown } | undefined)?.ref;
  return typeof ref === 'string' ? ref.slice(0, 40) : undefined;
}

/** Refused by the Redis gate (not durable, replicas offline, memory low): counted, logged without a flood. */
function refuse(h: Handling, target: RouteTarget, ids: CallbackIds, refusal: RedisRefusal): RedisRefusal {
  h.metrics.enqueueFailures.inc({ merchant: target.label });
  h.gate.noteRefusal(ids, refusal);
  return refusal;
}

/** Store the job durably in its merchant's queue (its batch proven kept); the failure's code, or undefined. */
async function enqueueDurably(
  h: Handling,
  { job, lane, label }: { job: CallbackJobInput; lane: IngestLane; label: string },
  check: BatchDurabilityCheck,
  ids: CallbackIds,
  keyIndex: number,
): Promise<ErrorCode | undefined> {
  try {
    const jobId = await inSpan('callback enqueue', {}, async (enqueueSpan) => {
      const id = await h.enqueuer.enqueue(job, { check, queue: lane.queue });
      enqueueSpan?.setAttribute('mcb.job_id', id);
      return id;
    });
    // debug, not info: a line per callback is a hot path's cost (pino's redaction and serialisation), and each one
    // is counted (ingest_callbacks_total), stored as its job and shown by the console's search.
    h.logger.debug({ ...ids, jobId, keyIndex, outcome: 'enqueued' }, 'callback accepted');
    return undefined;
  } catch (e) {
    h.metrics.enqueueFailures.inc({ merchant: label });
    const err = coerceError(e);
    h.logger.error(
      { ...ids, outcome: 'enqueue-failed', err: err.cause ?? err },
      'callback not acknowledged: enqueue failed',
    );
    return isAppError(e) ? e.code : ErrorCodes.ENQUEUE_FAILED;
  }
}
