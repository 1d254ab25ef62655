import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { request } from 'undici';
import type { OpenedReview } from './apply-event.ts';

/** What an operator is told. Order numbers, states, codes and reasons; never a callback record or an amount field of it. */
export type AlertMessage =
  | {
      type: 'job.exhausted';
      /** The job failed for good: attempts exhausted or a permanent error. It stays in the dashboard's failed list. */
      queue: string;
      jobId: string;
      jobName: string;
      orderNo?: string;
      state?: number;
      merchantOrderNo?: string;
      attemptsMade: number;
      /** The job's (sanitised) failure reason, `CODE: reason`. */
      reason: string;
    }
  | {
      type: 'review.opened';
      reviewId: number;
      kind: string;
      orderNo: string;
      state: number;
      merchantOrderNo: string;
      code: string;
      reason: string;
    };

/** Sends alerts without ever blocking or failing the caller. */
export interface Alerter {
  /** Queue one message for delivery; returns at once. Delivery failures are logged, never thrown. */
  notify(message: AlertMessage): void;
  /** Wait for deliveries in flight (each bounded by the timeout). */
  close(): Promise<void>;
}

/** Options of {@link createAlerter}. */
export interface AlerterOptions {
  /** ALERT_WEBHOOK_URL; without it alerts are only logged. */
  url: string | undefined;
  logger: Logger;
  /** Deadline of one delivery, in ms. @defaultValue 5000 */
  timeoutMs?: number;
  /** Deliveries in flight at most; beyond it messages are logged and dropped (a dead webhook must not pile up memory). @defaultValue 100 */
  maxInFlight?: number;
  /** Who sends (the `source` field). @defaultValue 'worker' */
  source?: string;
}

/**
 * POSTs each message as JSON (`{...message, source, at, summary}`) to ALERT_WEBHOOK_URL with one attempt and a
 * deadline. The job path calls `notify` and moves on; a slow or dead webhook costs it nothing.
 */
export function createAlerter(options: AlerterOptions): Alerter {
  const { url, logger } = options;
  const timeoutMs = options.timeoutMs ?? 5000;
  const maxInFlight = options.maxInFlight ?? 100;
  const inFlight = new Set<Promise<void>>();

  const deliver = async (body: string, type: string): Promise<void> => {
    try {
      const res = await request(url!, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await res.body.dump();
      if (res.statusCode >= 300) logger.warn({ alert: type, status: res.statusCode }, 'alert webhook refused the message');
    } catch (e) {
      logger.warn({ alert: type, err: coerceError(e) }, 'alert webhook unreachable; message dropped');
    }
  };

  return {
    notify(message) {
      const summary = summarize(message);
      logger.warn({ alert: message.type, ...ids(message) }, `ALERT ${summary}`);
      if (!url) return;
      if (inFlight.size >= maxInFlight) {
        logger.error({ alert: message.type, inFlight: inFlight.size }, 'alert webhook backlog full; message dropped');
        return;
      }
      const body = JSON.stringify({ ...message, source: options.source ?? 'worker', at: new Date().toISOString(), summary });
      const p = deliver(body, message.type).finally(() => inFlight.delete(p));
      inFlight.add(p);
    },
    async close() {
      await Promise.all([...inFlight]);
    },
  };
}

function ids(m: AlertMessage) {
  return m.type === 'job.exhausted'
    ? { jobId: m.jobId, orderNo: m.orderNo, state: m.state, merchantOrderNo: m.merchantOrderNo }
    : { reviewId: m.reviewId, orderNo: m.orderNo, state: m.state, merchantOrderNo: m.merchantOrderNo, code: m.code };
}

function summarize(m: AlertMessage): string {
  return m.type === 'job.exhausted'
    ? `job ${m.jobId} failed for good after ${m.attemptsMade} attempt(s): ${m.reason}`
    : `review ${m.reviewId} opened for ${m.kind} ${m.orderNo} state ${m.state} (order ${m.merchantOrderNo}): ${m.code}`;
}

/** The {@link ApplyDeps.onReviewOpened} hook that tells an operator about each review as it opens. */
export function alertOnReviewOpened(alerts: Alerter): (review: OpenedReview) => void {
  return (review) => alerts.notify({ type: 'review.opened', ...review, reason: review.reason.slice(0, 500) });
}
