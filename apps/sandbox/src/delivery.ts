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
  merchantPublicKeyPem: string;
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

export function createDeliveryScheduler(opts: DeliverySchedulerOptions): DeliveryScheduler {
  const { timeScale, logger, events } = opts;
  const agent = new Agent({
    connect: { timeout: opts.replyTimeoutMs },
    headersTimeout: opts.replyTimeoutMs,
    bodyTimeout: opts.replyTimeoutMs,
    keepAliveTimeout: 4_000,
  });
  const timers = new Map<string, NodeJS.Timeout>();
  const live = new Map<string, Delivery>();
  let closing = new AbortController();

  const real = (platformMs: number) => Math.max(0, platformMs / timeScale);

  function settle(d: Delivery, status: 'delivered' | 'gave-up' | 'cancelled'): void {
    d.status = status;
    d.nextAttemptAt = null;
    live.delete(d.id);
    logger.info(
      { delivery: d.id, orderNo: d.orderNo, event: d.event, attempts: d.attempts.length, status },
      'callback delivery settled',
    );
    events.emit(status, d);
    events.emit('settled', d);
  }

  function arm(d: Delivery, delayMs: number): void {
    live.set(d.id, d);
    d.status = 'scheduled';
    d.nextAttemptAt = new Date(Date.now() + delayMs).toISOString();
    const timer = setTimeout(() => {
      timers.delete(d.id);
      void runAttempt(d);
    }, delayMs);
    timers.set(d.id, timer);
  }

  async function send(d: Delivery, number: number, copy: number): Promise<Attempt> {
    const started = Date.now();
    const at = new Date(started).toISOString();
    const base = { number, copy, at };
    let body: string;
    try {
      body = JSON.stringify({
        encryptedData: opts.encrypt(d.record, opts.merchantPublicKeyPem, { minBlocks: d.minBlocks }),
      });
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
    const signal = AbortSignal.any([closing.signal, AbortSignal.timeout(opts.replyTimeoutMs)]);
    try {
      const res = await request(d.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'mcb-sandbox' },
        body,
        dispatcher: agent,
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
      const timedOut =
        (signal.aborted && !closing.signal.aborted) ||
        e instanceof undiciErrors.HeadersTimeoutError ||
        e instanceof undiciErrors.BodyTimeoutError ||
        e instanceof undiciErrors.ConnectTimeoutError;
      const err = coerceError(e);
      const code = (e as { code?: string }).code;
      return {
        ...base,
        status: null,
        bodySnippet: '',
        outcome: 'failure',
        error: closing.signal.aborted ? 'cancelled' : timedOut ? 'timeout' : `${code ?? err.name}: ${err.message}`,
        durationMs: Date.now() - started,
      };
    }
  }

  async function runAttempt(d: Delivery): Promise<void> {
    if (FINAL.has(d.status)) return;
    live.set(d.id, d);
    d.status = 'sending';
    d.nextAttemptAt = null;
    const number = new Set(d.attempts.map((a) => a.number)).size + 1;
    const started = Date.now();
    // Duplicates go out together, as a platform retrying on its own timer would race with itself.
    const copies = await Promise.all(Array.from({ length: d.duplicate }, (_, i) => send(d, number, i + 1)));
    if (d.status !== 'sending') return; // cancelled while waiting for replies
    for (const a of copies) {
      d.attempts.push(a);
      events.emit('attempt', d, a);
    }
    const ok = copies.some((a) => a.outcome === 'success');
    logger.info(
      {
        delivery: d.id,
        orderNo: d.orderNo,
        attempt: number,
        status: copies[0]?.status,
        outcome: ok ? 'success' : 'failure',
      },
      'callback attempt',
    );
    if (ok) return settle(d, 'delivered');
    if (number >= MAX_ATTEMPTS) return settle(d, 'gave-up');
    // The gap runs from the start of the previous attempt; a reply slower than the gap delays the next one.
    const gap = real(RETRY_GAPS_MS[number - 1] ?? 0);
    arm(d, Math.max(0, started + gap - Date.now()));
  }

  return {
    schedule(d) {
      arm(d, real(opts.firstAttemptDelayMs));
    },
    attemptNow(d) {
      return runAttempt(d);
    },
    settled(d) {
      if (FINAL.has(d.status)) return Promise.resolve(d);
      return new Promise((resolve) => {
        const onSettled = (s: Delivery) => {
          if (s.id !== d.id) return;
          events.off('settled', onSettled);
          resolve(s);
        };
        events.on('settled', onSettled);
      });
    },
    cancelAll() {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
      closing.abort();
      closing = new AbortController();
      for (const d of [...live.values()]) settle(d, 'cancelled');
    },
    async close() {
      this.cancelAll();
      closing.abort();
      await agent.close();
    },
  };
}
