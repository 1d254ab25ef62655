/**
 * The requests of one process waiting for a start time of the fleet's Get order budget (fleet.ts), in arrival
 * order, and the one pump that reserves start times for them: from the fleet's budget through the link, or from
 * this process's own share while Redis is away.
 */
import { AppError, ErrorCodes } from '../errors.ts';
import type { FleetPlan } from './fleet-types.ts';
import type { FleetLink } from './fleet-link.ts';
import type { FleetMetrics } from './fleet-metrics.ts';
import type { ReserveReply } from './fleet-script.ts';

/** Most start times reserved in one round trip. */
const MAX_LEASE = 64;
/**
 * The pump never sleeps longer than this between reservations, whatever the budget's reply says: a reply is never
 * longer than one interval (at most 1 s) unless the budget's state is wrong, and a state put right meanwhile (the key
 * deleted, a clock that caught up) is then seen within a second.
 */
export const MAX_WAIT_MS = 1000;

type Waiter = { go: () => void; fail: (e: Error) => void; signal?: AbortSignal; done: boolean };

/** The waiting requests (see the module's comment). */
export interface FleetQueue {
  /** Wait for a start time. */
  take(signal?: AbortSignal): Promise<void>;
  /** Fail every waiting request, each with its own `error()`. */
  failAll(error: () => Error): void;
}

const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A waiter settled once: by `go`, by `fail`, or by its caller's signal. */
function waiterOf(resolve: () => void, reject: (e: Error) => void, signal: AbortSignal | undefined): Waiter {
  const w: Waiter = {
    done: false,
    signal,
    go: () => {
      if (w.done) return;
      w.done = true;
      resolve();
    },
    fail: (e) => {
      if (w.done) return;
      w.done = true;
      reject(e);
    },
  };
  return w;
}

/** Requests waiting in arrival order; those settled meanwhile (gave up) are dropped as they reach the front. */
function waitingLine() {
  const waiters: Waiter[] = [];
  return {
    push: (w: Waiter) => void waiters.push(w),
    /** Put `w` first in line again. */
    unshift: (w: Waiter) => void waiters.unshift(w),
    /** The first waiter still waiting, taken out of the line. */
    next(): Waiter | undefined {
      while (waiters.length > 0) {
        const w = waiters.shift()!;
        if (!w.done) return w;
      }
      return undefined;
    },
    /** How many are in line (from the first still waiting). */
    pending(): number {
      while (waiters.length > 0 && waiters[0]!.done) waiters.shift();
      return waiters.length;
    },
  };
}

export function createFleetQueue(link: FleetLink, plan: FleetPlan, metrics: FleetMetrics | undefined): FleetQueue {
  const { state } = link;
  const line = waitingLine();
  let pumping = false;

  /** Start `w` at `ms` from now, the start time the fleet's budget gave it. */
  const startAt = (w: Waiter, ms: number) => {
    if (ms < 1) {
      metrics?.granted.inc({ mode: 'fleet' });
      return w.go();
    }
    const due = performance.now() + ms;
    setTimeout(() => {
      // A timer that fires late (a stalled event loop) would bunch this start with the fleet's next ones: the
      // start time goes unused and the request asks again, first in line (or fails, if the fleet closed meanwhile:
      // close() could not fail it, it was not in line).
      if (w.done) return;
      if (performance.now() - due <= plan.staleMs) {
        metrics?.granted.inc({ mode: 'fleet' });
        return w.go();
      }
      if (state.closed) return w.fail(new AppError(ErrorCodes.PLATFORM_ABORTED, 'the platform client is closing'));
      line.unshift(w);
      void pump();
    }, ms);
  };

  /** One lease from the fleet's budget, handed to the waiters in line (or the fallback entered, if Redis is away). */
  const leaseRound = async (): Promise<void> => {
    const want = Math.min(line.pending(), MAX_LEASE);
    let reply: ReserveReply;
    try {
      reply = await link.reserve(want);
    } catch (e) {
      link.enterFallback(e);
      return;
    }
    if (reply.throttled) metrics?.refusals.inc();
    let last = 0;
    for (const ms of reply.delaysMs) {
      const w = line.next();
      if (!w) break; // its caller gave up meanwhile: the start time goes unused
      startAt(w, ms);
      last = ms;
    }
    // Ask again half a horizon before the lease is spent (so that a late timer does not let the budget's next
    // start times pass unused), or when the budget has room again; never later than MAX_WAIT_MS.
    const wait =
      reply.delaysMs.length === 0
        ? reply.retryMs + Math.random() * (plan.intervalUs / 1000)
        : last - plan.horizonUs / 2000;
    if (wait >= 1) await pause(Math.min(wait, MAX_WAIT_MS));
  };

  const pump = async () => {
    if (pumping) return;
    pumping = true;
    try {
      while (!state.closed && line.pending() > 0) {
        if (state.fallback) {
          await link.localSpacer().take();
          line.next()?.go();
          metrics?.granted.inc({ mode: 'local' });
          continue;
        }
        await leaseRound();
      }
    } finally {
      pumping = false;
    }
  };

  return {
    take(signal) {
      return new Promise<void>((resolve, reject) => {
        const w = waiterOf(resolve, reject, signal);
        if (signal?.aborted)
          return w.fail(new AppError(ErrorCodes.PLATFORM_ABORTED, 'aborted while waiting for a request slot'));
        signal?.addEventListener(
          'abort',
          () => w.fail(new AppError(ErrorCodes.PLATFORM_ABORTED, 'aborted while waiting for a request slot')),
          { once: true },
        );
        line.push(w);
        void pump();
      });
    },
    failAll(error) {
      for (let w = line.next(); w; w = line.next()) w.fail(error());
    },
  };
}
