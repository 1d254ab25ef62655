/**
 * The circuit breaker's state shared by the fleet. Each process keeps its own breaker (it counts its own failures);
 * when one opens, the fleet's state opens, and every process holds its breaker open (cockatiel's isolation) instead
 * of each probing the platform on its own schedule. Probes are then the fleet's: a process sends one only while
 * it holds the fleet's probe token (a few a second in all). The first probe the platform answers closes the fleet's
 * state, and every process releases its breaker when it sees that (within its 250 ms look at the state).
 */
import { CircuitState, type CircuitBreakerPolicy, type IDisposable } from 'cockatiel';
import { AppError, ErrorCodes } from '../errors.ts';
import type { Fleet } from './fleet-types.ts';

/** A breaker bound to the fleet's state. */
export interface SharedBreaker {
  /** True when this call may probe the platform: the breaker is held open by the fleet and the token is ours. */
  mayProbe(): Promise<boolean>;
  /**
   * Send one probe. Resolves with the answer when the platform answered (the fleet's breaker closes); resolves
   * undefined when it failed as in an outage (the fleet's breaker stays open); throws any other failure (which is an
   * answer too: the breaker closes and the caller gets it).
   */
  probe<T>(send: () => Promise<T>, isFailure: (e: unknown) => boolean): Promise<{ value: T } | undefined>;
}

export function shareBreaker(breaker: CircuitBreakerPolicy, fleet: Fleet): SharedBreaker {
  let hold: IDisposable | undefined;
  const follow = (open: boolean) => {
    if (open && !hold) hold = breaker.isolate();
    if (!open && hold) {
      const h = hold;
      hold = undefined;
      h.dispose();
    }
  };
  fleet.onBreakerChange(follow);
  follow(fleet.breakerOpen());
  // This process's own failures opened its breaker: the fleet's opens (and the breaker is held, not half-opened).
  breaker.onStateChange((s) => {
    if (s === CircuitState.Open) fleet.reportOpen();
  });
  return {
    mayProbe: async () => hold !== undefined && (await fleet.tryProbe()),
    async probe(send, isFailure) {
      try {
        const value = await send();
        fleet.reportClosed();
        return { value };
      } catch (e) {
        if (isFailure(e)) {
          fleet.reportOpen();
          return undefined;
        }
        // The caller gave up before the platform said anything: no news either way.
        if (e instanceof AppError && e.code === ErrorCodes.PLATFORM_ABORTED) throw e;
        fleet.reportClosed();
        throw e;
      }
    },
  };
}
