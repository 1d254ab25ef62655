import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { request } from 'undici';
import type { OpenedReview } from '@mcb/settlement';

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
    }
  | {
      /** The reviews opened after the first one of a window, in one message (a flood cannot crowd out other alerts). */
      type: 'reviews.opened';
      count: number;
      byCode: Record<string, number>;
      /** The first few review ids of the window. */
      reviewIds: number[];
      windowSeconds: number;
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
  /**
   * Review alerts are aggregated per window: the first review of a window is sent as it opens, the others of the
   * window in one `reviews.opened` message at its end. @defaultValue 60000
   */
  reviewWindowMs?: number;
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
  const reviewWindowMs = options.reviewWindowMs ?? 60_000;
  let window: { timer: NodeJS.Timeout; count: number; byCode: Record<string, number>; reviewIds: number[] } | undefined;

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
      if (res.statusCode >= 300)
        logger.warn({ alert: type, status: res.statusCode }, 'alert webhook refused the message');
    } catch (e) {
      logger.warn({ alert: type, err: coerceError(e) }, 'alert webhook unreachable; message dropped');
    }
  };

  const send = (message: AlertMessage) => {
    const summary = summarize(message);
    logger.warn({ alert: message.type, ...ids(message) }, `ALERT ${summary}`);
    if (!url) return;
    if (inFlight.size >= maxInFlight) {
      logger.error({ alert: message.type, inFlight: inFlight.size }, 'alert webhook backlog full; message dropped');
      return;
    }
    const body = JSON.stringify({
      ...message,
      source: options.source ?? 'worker',
      at: new Date().toISOString(),
      summary,
    });
    const p = deliver(body, message.type).finally(() => inFlight.delete(p));
    inFlight.add(p);
  };

  const closeWindow = () => {
    const w = window;
    window = undefined;
    if (!w) return;
    clearTimeout(w.timer);
    if (w.count > 0) {
      send({
        type: 'reviews.opened',
        count: w.count,
        byCode: w.byCode,
        reviewIds: w.reviewIds,
        windowSeconds: reviewWindowMs / 1000,
      });
    }
  };

  return {
    notify(message) {
      if (message.type !== 'review.opened') return send(message);
      if (!window) {
        // The first review of a window goes out at once; the rest of the window is counted and sent together.
        window = { timer: setTimeout(closeWindow, reviewWindowMs), count: 0, byCode: {}, reviewIds: [] };
        window.timer.unref();
        return send(message);
      }
      window.count++;
      window.byCode[message.code] = (window.byCode[message.code] ?? 0) + 1;
      if (window.reviewIds.length < 10) window.reviewIds.push(message.reviewId);
    },
    async close() {
      closeWindow();
      await Promise.all([...inFlight]);
    },
  };
}

function ids(m: AlertMessage) {
  if (m.type === 'job.exhausted')
    return { jobId: m.jobId, orderNo: m.orderNo, state: m.state, merchantOrderNo: m.merchantOrderNo };
  if (m.type === 'review.opened')
    return {
      reviewId: m.reviewId,
      orderNo: m.orderNo,
      state: m.state,
      merchantOrderNo: m.merchantOrderNo,
      code: m.code,
    };
  return { count: m.count, byCode: m.byCode };
}

function summarize(m: AlertMessage): string {
  if (m.type === 'job.exhausted')
    return `job ${m.jobId} failed for good after ${m.attemptsMade} attempt(s): ${m.reason}`;
  if (m.type === 'review.opened') {
    return `review ${m.reviewId} opened for ${m.kind} ${m.orderNo} state ${m.state} (order ${m.merchantOrderNo}): ${m.code}`;
  }
  const codes = Object.entries(m.byCode)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
  return `${m.count} more review(s) opened in the last ${m.windowSeconds} s (${codes}); see the console's reviews`;
}

/** The {@link ApplyDeps.onReviewOpened} hook that tells an operator about each review as it opens. */
export function alertOnReviewOpened(alerts: Alerter): (review: OpenedReview) => void {
  return (review) => alerts.notify({ type: 'review.opened', ...review, reason: review.reason.slice(0, 500) });
}
