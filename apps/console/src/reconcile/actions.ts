/**
 * Reconcile actions: run a sweep now. The role, the reason and the audit row are checked and written here (STYLE 18);
 * the API only calls it.
 */
import type { Config } from '@mcb/core/config';
import type { Db } from '@mcb/core/db';
import type { Logger } from '@mcb/core/logger';
import type { Registry } from '@mcb/core/metrics';
import type { PlatformClient } from '@mcb/core/platform';
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

/** What a sweep now needs: the sweep's dependencies, built by {@link reconcileActionDeps}. */
export interface ReconcileActionDeps {
  sweep: SweepDeps;
}

/** Run a sweep now (role operator, a reason), recorded in the audit trail with its counts. */
export async function reconcileNow(deps: ReconcileActionDeps, actor: Actor, reason: unknown): Promise<SweepReport> {
  return performExternalAction(
    { db: deps.sweep.db, logger: deps.sweep.logger },
    actor,
    { action: 'reconcile.run', target: 'sweep', reason },
    async () => {
      // An operator asks now, often for a customer who says they paid: orders on their "unknown" back-off too.
      const report = await runSweep(deps.sweep, { trigger: 'manual', askBackedOff: true });
      const { scanned, recovered, stillPending, unknown, reviews, errors, stoppedEarly } = report;
      return {
        result: report,
        outcome: stoppedEarly ? 'stopped-early' : 'completed',
        details: { scanned, recovered, stillPending, unknown, reviews, errors },
      };
    },
  );
}

/**
 * The sweep's dependencies from the console's own clients: the same settings (RECONCILE_*), the same lock key
 * (QUEUE_PREFIX) and the same merchant as the workers', so a manual sweep and a scheduled one never overlap.
 * `redis` holds the lock; a `producer` connection suits (a Redis outage answers 503 within about a second).
 */
export function reconcileActionDeps(deps: {
  config: Config;
  db: Db;
  platform: PlatformClient;
  logger: Logger;
  redis: RedisClient;
  registry?: Registry;
}): ReconcileActionDeps {
  return {
    sweep: {
      db: deps.db.db,
      platform: deps.platform,
      logger: deps.logger,
      redis: deps.redis,
      lockKey: merchantKeys(deps.config.QUEUE_PREFIX).sweepLock,
      merchantNo: deps.config.MERCHANT_NO!,
      settings: sweepSettingsFromConfig(deps.config),
      reconcileMetrics: deps.registry ? createReconcileMetrics(deps.registry) : undefined,
    },
  };
}
