import {
  BrokenCircuitError,
  circuitBreaker,
  CircuitState,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleWhen,
  IsolatedCircuitError,
} from 'cockatiel';
import { AppError, ErrorCodes } from '../errors.ts';
import type { PlatformClient } from './client.ts';
import { shareBreaker } from './fleet-breaker.ts';
import type { Fleet } from './fleet-types.ts';
import { createRateSpacer } from './rate-spacer.ts';

/** Get order's outcome as flow control sees it: how long the platform took, and whether it was an outage. */
export interface PlatformSample {
  ms: number;
  /**
   * False for an outage-like failure (timeout, unreachable, 5xx/429/408, a reply that is not the envelope); a
   * business answer counts as ok.
   */
  ok: boolean;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

/** Options of {@link guardPlatform}. */
export interface PlatformGuardOptions {
  /** Most Get order requests per second from this process (ignored with `fleet`); 0 = no cap. @defaultValue 0 */
  maxRps?: number;
  /**
   * The fleet's budget and breaker state (createFleet, PLATFORM_MAX_RPS for the whole deployment): Get order takes
   * its start times from the fleet's budget, an open breaker opens the fleet's, and the fleet probes a few times a
   * second in all instead of each process on its own.
   */
  fleet?: Fleet;
  /** Consecutive outage-like failures that open the circuit. @defaultValue 10 */
  failuresToOpen?: number;
  /**
   * How long the circuit stays open before one probe is let through, growing while probes fail.
   * @defaultValue 1 s to 30 s
   */
  openMs?: { initial: number; max: number };
  /**
   * How long a call waits, in ms, for an open circuit before it fails with PLATFORM_CIRCUIT_OPEN (transient). Calls
   * wait rather than fail so that an outage does not burn jobs' attempts. @defaultValue 30000
   */
  maxWaitMs?: number;
  /** Told each Get order's latency and outcome (the worker's concurrency limiter listens). */
  onSample?: (sample: PlatformSample) => void;
  /** Told when the circuit opens, half-opens or closes. */
  onStateChange?: (state: BreakerState) => void;
}

/** A guarded platform client, and what its guard is doing. */
export interface GuardedPlatformClient extends PlatformClient {
  breakerState(): BreakerState;
}

/**
 * An outage, not an answer: the platform did not reply in time, could not be reached, said it is overloaded, or
 * something in front of it answered instead (a transient PLATFORM_BAD_RESPONSE: an HTML maintenance page, a body
 * that is not the envelope).
 */
export function isPlatformOutage(e: unknown): boolean {
  if (!(e instanceof AppError) || !e.transient) return false;
  return (
    e.code === ErrorCodes.PLATFORM_TIMEOUT ||
    e.code === ErrorCodes.PLATFORM_UNREACHABLE ||
    e.code === ErrorCodes.PLATFORM_HTTP_ERROR ||
    e.code === ErrorCodes.PLATFORM_BAD_RESPONSE
  );
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const STATES: Record<CircuitState, BreakerState> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half-open',
  [CircuitState.Isolated]: 'open',
};

/**
 * Get order behind flow control: a request rate cap (PLATFORM_MAX_RPS) and a circuit breaker (cockatiel). While the
 * circuit is open, callers wait (up to `maxWaitMs`) for a probe to succeed instead of failing: a platform outage
 * then costs the jobs time, not attempts. getPaymentMethods passes through (it has its own cache and schedule).
 */
export function guardPlatform(client: PlatformClient, options: PlatformGuardOptions = {}): GuardedPlatformClient {
  const fleet = options.fleet;
  const spacer = !fleet && options.maxRps ? createRateSpacer(options.maxRps) : undefined;
  const maxWaitMs = options.maxWaitMs ?? 30_000;
  const breaker = circuitBreaker(handleWhen(isPlatformOutage), {
    breaker: new ConsecutiveBreaker(options.failuresToOpen ?? 10),
    halfOpenAfter: new ExponentialBackoff({
      initialDelay: options.openMs?.initial ?? 1000,
      maxDelay: options.openMs?.max ?? 30_000,
    }),
  });
  // Told once per change: a breaker held open for the fleet goes Open then Isolated, both 'open'.
  let told: BreakerState = 'closed';
  breaker.onStateChange((s) => {
    if (STATES[s] === told) return;
    told = STATES[s];
    options.onStateChange?.(told);
  });
  const shared = fleet ? shareBreaker(breaker, fleet) : undefined;

  const call = async (merchantOrderNo: string, signal: AbortSignal | undefined, probe = false) => {
    await (fleet ? fleet.take(signal) : spacer?.take(signal));
    // The fleet's breaker opened while this call waited for its start time: it waits with the others instead.
    if (fleet && !probe && breaker.state === CircuitState.Isolated) throw new IsolatedCircuitError();
    const started = performance.now();
    try {
      const order = await client.getOrder(merchantOrderNo, { signal });
      options.onSample?.({ ms: performance.now() - started, ok: true });
      return order;
    } catch (e) {
      options.onSample?.({ ms: performance.now() - started, ok: !isPlatformOutage(e) });
      throw e;
    }
  };

  return {
    breakerState: () => STATES[breaker.state],
    async getOrder(merchantOrderNo, callOpts = {}) {
      const giveUpAt = Date.now() + maxWaitMs;
      for (;;) {
        try {
          return await breaker.execute(() => call(merchantOrderNo, callOpts.signal));
        } catch (e) {
          // A failure that opened (or re-opened, as a failed probe) the circuit is the outage itself: wait it out
          // like the callers behind it. Any other failure, or one while the circuit stays closed, is the caller's.
          const outage =
            e instanceof BrokenCircuitError || (isPlatformOutage(e) && breaker.state !== CircuitState.Closed);
          if (!outage) throw e;
          // The fleet's breaker is open: one of its few probes a second, when this process holds the token.
          if (shared && (await shared.mayProbe())) {
            const probed = await shared.probe(() => call(merchantOrderNo, callOpts.signal, true), isPlatformOutage);
            if (probed) return probed.value;
          }
          if (Date.now() >= giveUpAt || callOpts.signal?.aborted) {
            throw new AppError(
              ErrorCodes.PLATFORM_CIRCUIT_OPEN,
              `Get order paused: the platform failed repeatedly and has not recovered within ${maxWaitMs} ms`,
              {
                details: { merchantOrderNo },
              },
            );
          }
          // Open (or half-open with its probe out): wait and ask again; one probe at a time tests the platform.
          await pause(Math.min(250, Math.max(1, giveUpAt - Date.now())));
        }
      }
    },
    getPaymentMethods: (opts) => client.getPaymentMethods(opts),
    close: () => client.close(),
  };
}
