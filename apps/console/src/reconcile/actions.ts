/**
 * Reconcile actions: run a sweep now. The role, the reason and the audit row are checked and written here (STYLE 18);
 * the API only calls it.
 */
import type { Config } from '@mcb/core/config';
import type { Db } from '@mcb/core/db';
import type { Logger } from '@mcb/core/logger';
import type { Registry } from '@mcb/core/metrics';
import { merchantKeys } from '@mcb/core/queue';
import type { RedisClient } from '@mcb/core/redis';
import {
  createReconcileMetrics,
  runSweep,
  sweepSettingsFromConfig,
  type SweepDeps,
  type SweepReport,
} from '@mcb/settlement';
import { performExternalAction, type Actor } from '../audit/perform.ts';
import type { ConsoleMerchants } from '../web/route-deps.ts';

/** What a sweep now needs: each merchant's sweep dependencies, built by {@link reconcileActionDeps}. */
export interface ReconcileActionDeps {
  /** The merchant a request names (its ref), or the only one: its sweep's dependencies and its ref. */
  sweepOf(ref: string | undefined): { ref: string; sweep: SweepDeps };
  /** Two or more merchants: the audit row names the merchant. */
  several: boolean;
}

/** The audit target of a sweep now: `sweep`, or `sweep:{ref}` when the console serves several merchants. */
export const sweepTarget = (ref: string | undefined, several: boolean): string =>
  several && ref ? `sweep:${ref}` : 'sweep';

/**
 * Run a sweep now of one merchant's pending orders (role operator, a reason), with its lock, its merchant number and
 * its platform client, recorded in the audit trail with its counts (and its ref, with several merchants).
 */
export async function reconcileNow(
  deps: ReconcileActionDeps,
  actor: Actor,
  input: { reason: unknown; merchant?: string | undefined },
): Promise<SweepReport> {
  const { ref, sweep } = deps.sweepOf(input.merchant);
  const named = deps.several ? { merchant: ref } : {};
  return performExternalAction(
    { db: sweep.db, logger: sweep.logger },
    actor,
    {
      action: 'reconcile.run',
      target: sweepTarget(ref, deps.several),
      reason: input.reason,
      merchant: sweep.merchantNo,
    },
    async () => {
      // An operator asks now, often for a customer who says they paid: orders on their "unknown" back-off too.
      const report = await runSweep(sweep, { trigger: 'manual', askBackedOff: true });
      const { scanned, recovered, stillPending, unknown, reviews, errors, stoppedEarly } = report;
      return {
        result: report,
        outcome: stoppedEarly ? 'stopped-early' : 'completed',
        details: { ...named, scanned, recovered, stillPending, unknown, reviews, errors },
      };
    },
  );
}

/**
 * The sweeps' dependencies from the console's own clients: per merchant the same settings (RECONCILE_*), the same lock
 * key (`merchantKeys(QUEUE_PREFIX, ref).sweepLock`), merchant number and platform client as its worker lane's, so a
 * manual sweep and a scheduled one never overlap. `redis` holds the lock; a `producer` connection suits (a Redis
 * outage answers 503 within about a second).
 */
export function reconcileActionDeps(deps: {
  config: Config;
  db: Db;
  merchants: ConsoleMerchants;
  logger: Logger;
  redis: RedisClient;
  registry?: Registry;
  merchantRegistries?: ReadonlyMap<string, Registry>;
}): ReconcileActionDeps {
  const settings = sweepSettingsFromConfig(deps.config);
  // The sweep metrics of each merchant, on its own registry (labelled `merchant`), else one set for the console
  // (registered once; the audit row names the merchant).
  const shared = deps.registry && !deps.merchantRegistries ? createReconcileMetrics(deps.registry) : undefined;
  const own = new Map(
    [...(deps.merchantRegistries ?? [])].map(([ref, registry]) => [ref, createReconcileMetrics(registry)] as const),
  );
  return {
    several: deps.merchants.several,
    sweepOf(ref) {
      const { merchant, platform } = deps.merchants.of(ref);
      return {
        ref: merchant.ref,
        sweep: {
          db: deps.db.db,
          platform,
          logger: deps.logger,
          redis: deps.redis,
          lockKey: merchantKeys(deps.config.QUEUE_PREFIX, merchant.ref).sweepLock,
          merchantNo: merchant.merchantNo,
          settings,
          reconcileMetrics: own.get(merchant.ref) ?? shared,
        },
      };
    },
  };
}
