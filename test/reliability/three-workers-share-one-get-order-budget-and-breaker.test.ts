import { readFleetState } from '@mcb/core/platform';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';
import { busiestSecond, perSecond, startWorkerFleet } from './helpers/worker-fleet.ts';
import { merchantKeys } from '@mcb/core/queue';

// PLATFORM_MAX_RPS is the deployment's budget, not each process's: three worker processes (their own processes, as
// deployed) share it through Redis. The platform double counts Get order requests as they arrive, in a process of its
// own: in the test's, the stalls of the test's event loop under CPU load stamped the requests of a few hundred ms
// with one time, and a steady 40 a second read as 48 (helpers/platform-process.ts).
const BUDGET = 40;
// The stated burst tolerance (docs/deployment.md "Sizing"): 10 % of the budget, at least 3 requests.
const TOLERANCE = Math.max(3, Math.ceil(BUDGET / 10));

describe('three worker processes and one Get order budget', () => {
  const env = useTestEnv();

  it(`drain a backlog at no more than ${BUDGET} Get orders a second in all (+${TOLERANCE}), use at least 60 % of it, and credit each pay-in once`, async () => {
    const PAYINS = 450;
    const fleet = await startWorkerFleet({
      db: env.db,
      databaseUrl: env.databaseUrl,
      redisUrl: env.redisUrl,
      prefix: `${env.prefix}-budget`,
      payins: PAYINS,
      count: 3,
      workerEnv: { PLATFORM_MAX_RPS: String(BUDGET) },
    });
    try {
      await fleet.enqueue();
      await waitFor(async () => (await fleet.credited()) === PAYINS, {
        timeoutMs: 50_000,
        intervalMs: 250,
        message: `not every pay-in was credited (logs: ${fleet.logDir})`,
      });
      const arrivals = await fleet.platform.arrivals();
      const seconds = perSecond(arrivals);
      const spanS = (Math.max(...arrivals) - Math.min(...arrivals)) / 1000;
      // The platform counts per second; the busiest sliding second is told too (timers' and the network's jitter).
      console.log(
        `3 workers, budget ${BUDGET}: ${arrivals.length} Get orders in ${spanS.toFixed(1)} s; per second ${seconds.join(' ')}; busiest sliding second ${busiestSecond(arrivals)}`,
      );
      expect(Math.max(...seconds)).toBeLessThanOrEqual(BUDGET + TOLERANCE);
      // Used while the backlog lasted: on average at least 60 % of the budget from the first request to the last.
      expect(arrivals.length / Math.max(spanS, 1)).toBeGreaterThanOrEqual(0.6 * BUDGET);
      expect(await fleet.creditsOnce()).toEqual({ credits: PAYINS, twice: 0 });
      // Every process shared it (alive in the fleet's set), none died.
      expect((await readFleetState(fleet.redis, merchantKeys(`${env.prefix}-budget`).fleet)).processes).toBe(3);
      expect(fleet.exits).toEqual([]);
    } finally {
      await fleet.close();
    }
  }, 90_000);

  it('open the breaker together while the platform fails, probe a few times a second in all, and credit once it is back', async () => {
    const PAYINS = 120;
    const prefix = `${env.prefix}-breaker`;
    const fleet = await startWorkerFleet({
      db: env.db,
      databaseUrl: env.databaseUrl,
      redisUrl: env.redisUrl,
      prefix,
      payins: PAYINS,
      count: 3,
      workerEnv: { PLATFORM_MAX_RPS: String(BUDGET) },
    });
    try {
      await fleet.platform.setOutage(503);
      await fleet.enqueue();
      // Every process holds its breaker open, whether or not its own requests failed.
      await Promise.all(fleet.workers.map((w) => w.waitForOutput(/platform circuit breaker open/, 20_000)));
      expect((await readFleetState(fleet.redis, merchantKeys(prefix).fleet)).breakerOpen).toBe(true);
      const from = performance.now();
      await waitFor(() => performance.now() - from >= 3000, { timeoutMs: 5000, intervalMs: 100 });
      const during = (await fleet.platform.arrivals()).filter((t) => t >= from && t < from + 3000).length;
      console.log(`3 workers, breaker open: ${during} Get orders reached the failing platform in 3 s`);
      // The fleet's probe token: 3 a second in all (plus one for the window's edges and one already under way), not
      // 3 processes' worth of jobs.
      expect(during).toBeGreaterThanOrEqual(3);
      expect(during).toBeLessThanOrEqual(3 * 3 + 2);

      await fleet.platform.setOutage(undefined);
      const back = performance.now();
      await waitFor(async () => (await fleet.credited()) === PAYINS, {
        timeoutMs: 40_000,
        intervalMs: 250,
        message: `credits did not resume (logs: ${fleet.logDir})`,
      });
      console.log(
        `3 workers: ${PAYINS} pay-ins credited ${((performance.now() - back) / 1000).toFixed(1)} s after the platform came back`,
      );
      expect(await fleet.creditsOnce()).toEqual({ credits: PAYINS, twice: 0 });
      expect((await readFleetState(fleet.redis, merchantKeys(prefix).fleet)).breakerOpen).toBe(false);
      expect(fleet.exits).toEqual([]);
    } finally {
      await fleet.platform.setOutage(undefined).catch(() => undefined);
      await fleet.close();
    }
  }, 90_000);
});
