import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCodes, type AppError } from '@mcb/core/errors';
import { createFleet } from '@mcb/core/platform';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { merchantKeys } from '@mcb/core/queue';

// A start time whose timer fires late (a busy event loop) is not used, so as not to bunch with the fleet's next ones,
// and its request asks again, first in line. After close() there is no line: before issue 48 such a request was
// left waiting forever (close() fails only the requests in line). How much of the budget a busy process and the
// fleet use is timing, measured by `pnpm bench:fleet-budget` (docs/deployment.md), not here.

const env = useTestEnv();
const redises: Redis[] = [];
afterEach(() => {
  for (const r of redises.splice(0)) r.disconnect();
});

function connect(): Redis {
  const redis = createRedis(env.redisUrl, 'worker');
  redis.on('error', () => undefined);
  redises.push(redis);
  return redis;
}

/** Hold the event loop for `ms`, as CPU-bound work beside the requests does: every timer due meanwhile fires late. */
function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('close()', () => {
  it('a start time that fires late after close() fails its request instead of leaving it waiting', async () => {
    const fleet = createFleet({ redis: connect(), keys: merchantKeys(`${env.prefix}-closed`).fleet, maxRps: 100 });
    // 100 a second with a burst of 2: the first request is leased alone (the pump starts on it), the other 7 together,
    // at most 3 of them at once and the others on timers up to 50 ms on.
    const outcomes: string[] = [];
    const first = fleet.take();
    const rest = Array.from({ length: 7 }, () =>
      fleet.take().then(
        () => {
          // The first of the 7 to start (the lease's timers are set by then): close, then hold the event loop longer
          // than any start time may be late.
          if (outcomes.push('started') === 1) {
            void fleet.close();
            spin(150);
          }
        },
        (e: unknown) => void outcomes.push((e as AppError).code),
      ),
    );
    await first;
    await waitFor(() => outcomes.length === 7, { timeoutMs: 5000, message: 'a request was left waiting' });
    await Promise.all(rest);
    expect(outcomes.filter((o) => o !== 'started').every((o) => o === ErrorCodes.PLATFORM_ABORTED)).toBe(true);
    expect(outcomes.filter((o) => o === ErrorCodes.PLATFORM_ABORTED).length).toBeGreaterThan(0);
  });
});
