import type { EventEmitter } from 'node:events';
import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { Agent, request, errors as undiciErrors } from 'undici';
import type { Attempt, Delivery } from './model.ts';
import { isSuccessReply } from './reply-rules.ts';

/** Gaps between attempts, in platform time (spec, Retry schedule): 3, 9, 27 and 81 minutes. */
export const RETRY_GAPS_MS: readonly number[] = [3, 9, 27, 81].map((m) => m * 60_000);
/** At most 5 attempts per order event. */
export const MAX_ATTEMPTS = 5;
/** The spec's bound on the first attempt, in platform time. */
export const FIRST_ATTEMPT_LIMIT_MS = 30_000;
const SNIPPET = 64;

/** Encrypts a record's JSON text for the merchant (the codec's `encryptRecord`). */
export type EncryptRecord = (record: string, publicKeyPem: string, opts: { minBlocks?: number }) => string;

/** Options of {@link createDeliveryScheduler}. */
export interface DeliverySchedulerOptions {
  /** Platform time runs this many times faster than real time. @defaultValue 1 */
  timeScale: number;
  /** Delay of attempt 1 after the order completes, in platform ms (≤ 30 000). */
  firstAttemptDelayMs: number;
  /** How long a reply may take, in real ms; a time-out is a failed attempt. */
  replyTimeoutMs: number;
  /** The merchant accounts: a delivery is encrypted with the public key of its own (`Delivery.merchant`). */
  merchants: readonly { ref: string; merchantPublicKeyPem: string }[];
  encrypt: EncryptRecord;
  logger: Logger;
  /** Receives `attempt`, `delivered`, `gave-up` and `cancelled`. */
  events: EventEmitter;
}

/** Runs callback deliveries on the spec's schedule, scaled, and records every attempt. */
export interface DeliveryScheduler {
  /** Schedule attempt 1 after the first-attempt delay. */
  schedule(delivery: Delivery): void;
  /** Make attempt 1 now and resolve when it has finished (retries then follow the schedule). */
  attemptNow(delivery: Delivery): Promise<void>;
  /** Resolve with the delivery once it is delivered, given up or cancelled. */
  settled(delivery: Delivery): Promise<Delivery>;
  /** Stop every pending delivery (status `cancelled`). */
  cancelAll(): void;
  /** Cancel everything, abort replies being awaited, close sockets. */
  close(): Promise<void>;
}

const FINAL = new Set<Delivery['status']>(['delivered', 'gave-up', 'cancelled']);

/** What one scheduler holds: its options, its connection pool, the armed timers and the deliveries not settled. */
interface SchedulerState {
  readonly opts: DeliverySchedulerOptions;
  /** Each merchant account's public key by ref. */
  readonly publicKeys: ReadonlyMap<string, string>;
  readonly agent: Agent;
  readonly timers: Map<string, NodeJS.Timeout>;
  readonly live: Map<string, Delivery>;
  /** Aborted to cut the replies being awaited; replaced after each cancel. */
  closing: AbortController;
}

export function createDeliveryScheduler(opts: DeliverySchedulerOptions): DeliveryScheduler {
  const s: SchedulerState = {
    opts,
    publicKeys: new Map(opts.merchants.map((m) => [m.ref, m.merchantPublicKeyPem])),
    agent: new Agent({
      connect: { timeout: opts.replyTimeoutMs },
      headersTimeout: opts.replyTimeoutMs,
      bodyTimeout: opts.replyTimeoutMs,
      keepAliveTimeout: 4_000,
    }),
    timers: new Map(),
    live: new Map(),
    closing: new AbortController(),
  };
  return {
    schedule(d) {
      arm(s, d, realMs(s, opts.firstAttemptDelayMs));
    },
    attemptNow(d) {
      return runAttempt(s, d);
    },
    settled(d) {
      if (FINAL.has(d.status)) return Promise.resolve(d);
      return new Promise((resolve) => {
        const onSettled = (settled: Delivery) => {
          if (settled.id !== d.id) return;
          opts.events.off('settled', onSettled);
          resolve(settled);
        };
        opts.events.on('settled', onSettled);
      });
    },
    cancelAll() {
      for (const t of s.timers.values()) clearTimeout(t);
      s.timers.clear();
      s.closing.abort();
      s.closing = new AbortController();
      for (const d of [...s.live.values()]) settle(s, d, 'cancelled');
    },
    async close() {
      this.cancelAll();
      s.closing.abort();
      await s.agent.close();
    },
  };
}

/** Real ms of `platformMs` of platform time. */
const realMs = (s: SchedulerState, platformMs: number) => Math.max(0, platformMs / s.opts.timeScale);

function settle(s: SchedulerState, d: Delivery, status: 'delivered' | 'gave-up' | 'cancelled'): void {
  d.status = status;
  d.nextAttemptAt = null;
  s.live.delete(d.id);
  s.opts.logger.info(
    { delivery: d.id, orderNo: d.orderNo, event: d.event, attempts: d.attempts.length, status },
    'callback delivery settled',
  );
  s.opts.events.emit(status, d);
  s.opts.events.emit('settled', d);
}

/** Run the next attempt of `d` after `delayMs` (real time). */
function arm(s: SchedulerState, d: Delivery, delayMs: number): void {
  s.live.set(d.id, d);
  d.status = 'scheduled';
  d.nextAttemptAt = new Date(Date.now() + delayMs).toISOString();
  const timer = setTimeout(() => {
    s.timers.delete(d.id);
    void runAttempt(s, d);
  }, delayMs);
  s.timers.set(d.id, timer);
}

/** One attempt (every duplicate copy of it), then settle `d` or arm the next attempt on the schedule. */
async function runAttempt(s: SchedulerState, d: Delivery): Promise<void> {
  if (FINAL.has(d.status)) return;
  s.live.set(d.id, d);
  d.status = 'sending';
  d.nextAttemptAt = null;
  const number = new Set(d.attempts.map((a) => a.number)).size + 1;
  const started = Date.now();
  // Duplicates go out together, as a platform retrying on its own timer would race with itself.
  const copies = await Promise.all(Array.from({ length: d.duplicate }, (_, i) => send(s, d, number, i + 1)));
  if (d.status !== 'sending') return; // cancelled while waiting for replies
  for (const a of copies) {
    d.attempts.push(a);
    s.opts.events.emit('attempt', d, a);
  }
  const ok = copies.some((a) => a.outcome === 'success');
  s.opts.logger.info(
    {
      delivery: d.id,
      orderNo: d.orderNo,
      attempt: number,
      status: copies[0]?.status,
      outcome: ok ? 'success' : 'failure',
    },
    'callback attempt',
  );
  if (ok) return settle(s, d, 'delivered');
  if (number >= MAX_ATTEMPTS) return settle(s, d, 'gave-up');
  // The gap runs from the start of the previous attempt; a reply slower than the gap delays the next one.
  const gap = realMs(s, RETRY_GAPS_MS[number - 1] ?? 0);
  arm(s, d, Math.max(0, started + gap - Date.now()));
}

/** One copy of one attempt: encrypt the record, POST it, and record what came back. */
async function send(s: SchedulerState, d: Delivery, number: number, copy: number): Promise<Attempt> {
  const { opts } = s;
  const started = Date.now();
  const at = new Date(started).toISOString();
  const base = { number, copy, at };
  let body: string;
  try {
    const publicKey = s.publicKeys.get(d.merchant);
    if (publicKey === undefined) throw new Error(`no merchant account ${d.merchant}`);
    body = JSON.stringify({ encryptedData: opts.encrypt(d.record, publicKey, { minBlocks: d.minBlocks }) });
  } catch (e) {
    return {
      ...base,
      status: null,
      bodySnippet: '',
      outcome: 'failure',
      error: `encrypt: ${coerceError(e).message}`,
      durationMs: 0,
    };
  }
  const signal = AbortSignal.any([s.closing.signal, AbortSignal.timeout(opts.replyTimeoutMs)]);
  try {
    const res = await request(d.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'mcb-sandbox' },
      body,
      dispatcher: s.agent,
      signal,
    });
    const text = await res.body.text();
    const ok = isSuccessReply(res.statusCode, text);
    return {
      ...base,
      status: res.statusCode,
      bodySnippet: text.slice(0, SNIPPET),
      outcome: ok ? 'success' : 'failure',
      error: ok
        ? null
        : res.statusCode < 200 || res.statusCode > 299
          ? `status ${res.statusCode}`
          : 'body not accepted',
      durationMs: Date.now() - started,
    };
  } catch (e) {
    return { ...base, ...noReply(s, e, signal), durationMs: Date.now() - started };
  }
}

/** A send that got no reply: cancelled, timed out, or a network error. */
function noReply(s: SchedulerState, e: unknown, signal: AbortSignal) {
  const timedOut =
    (signal.aborted && !s.closing.signal.aborted) ||
    e instanceof undiciErrors.HeadersTimeoutError ||
    e instanceof undiciErrors.BodyTimeoutError ||
    e instanceof undiciErrors.ConnectTimeoutError;
  const err = coerceError(e);
  const code = (e as { code?: string }).code;
  return {
    status: null,
    bodySnippet: '',
    outcome: 'failure' as const,
    error: s.closing.signal.aborted ? 'cancelled' : timedOut ? 'timeout' : `${code ?? err.name}: ${err.message}`,
  };
}
