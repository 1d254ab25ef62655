import type { Config } from '@mcb/core/config';
import type { Db } from '@mcb/core/db';
import { ErrorCodes, isAppError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { Registry } from '@mcb/core/metrics';
import type { PlatformClient } from '@mcb/core/platform';
import type { RedisClient } from '@mcb/core/redis';
import { createReconcileMetrics, runSweep, sweepLockKey, sweepSettingsFromConfig, type SweepDeps } from '@mcb/settlement';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBodySchema } from '../schemas.ts';

/** What the reconcile route needs: the sweep's dependencies, built by {@link reconcileRouteDeps}. */
export interface ReconcileRouteDeps {
  sweep: SweepDeps;
}

/**
 * The sweep's dependencies from the console's own clients: the same settings (RECONCILE_*), the same lock key
 * (QUEUE_PREFIX) and the same merchant as the workers', so a manual sweep and a scheduled one never overlap.
 * `redis` holds the lock; a `producer` connection suits (a Redis outage answers 503 within about a second).
 */
export function reconcileRouteDeps(deps: {
  config: Config;
  db: Db;
  platform: PlatformClient;
  logger: Logger;
  redis: RedisClient;
  registry?: Registry;
}): ReconcileRouteDeps {
  return {
    sweep: {
      db: deps.db.db,
      platform: deps.platform,
      logger: deps.logger,
      redis: deps.redis,
      lockKey: sweepLockKey(deps.config.QUEUE_PREFIX),
      merchantNo: deps.config.MERCHANT_NO!,
      settings: sweepSettingsFromConfig(deps.config),
      reconcileMetrics: deps.registry ? createReconcileMetrics(deps.registry) : undefined,
    },
  };
}

const count = z.number().int().nonnegative();
const reportSchema = z.object({
  scanned: count.describe('Pending orders looked up with Get order'),
  recovered: z.object({ credited: count, succeeded: count, refused: count }).describe('Orders this sweep finalised'),
  stillPending: count.describe('Get order reports them not final: left pending'),
  unknown: count.describe('The platform does not know them (e.g. 40404): left pending, no review'),
  duplicates: count.describe('Applied by a callback meanwhile'),
  reviews: count.describe("Get order's answer failed verification: sent to review, not credited"),
  errors: count.describe('Orders the sweep could not decide (platform or database failing)'),
  beyondMaxAge: count.describe('Pending orders older than RECONCILE_MAX_AGE, which no sweep looks at'),
  stoppedEarly: z.boolean(),
  stopReason: z.string().nullable(),
  durationMs: count,
  startedAt: z.string(),
  window: z.object({ oldest: z.string(), newest: z.string() }).describe('The creation times swept'),
});

/**
 * `POST /api/reconcile`: run a sweep now, in this process, under the workers' lock, and answer what it found.
 * A sweep already running (scheduled or manual) answers 409 at once rather than queueing a second one.
 */
export const reconcileRoutes: FastifyPluginAsyncZod<ReconcileRouteDeps> = async (app, { sweep }) => {
  app.post(
    '/api/reconcile',
    {
      schema: {
        summary: 'Run a reconciliation sweep now',
        description:
          'Looks up pending orders created between RECONCILE_MAX_AGE and RECONCILE_MIN_AGE ago with Get order, at RECONCILE_RATE, and applies final states as their callbacks would have been. Answers when the sweep is done. See docs/reconciliation.md.',
        tags: ['reconciliation'],
        response: {
          200: reportSchema,
          409: errorBodySchema.describe('A sweep is already running (RECONCILE_IN_PROGRESS)'),
          503: errorBodySchema.describe('The sweep lock could not be asked for (RECONCILE_UNAVAILABLE)'),
        },
      },
    },
    async (req, reply) => {
      try {
        const report = await runSweep(sweep, { trigger: 'manual' });
        req.log.info({ scanned: report.scanned, recovered: report.recovered, stoppedEarly: report.stoppedEarly }, 'manual reconciliation sweep');
        return report;
      } catch (e) {
        if (isAppError(e, ErrorCodes.RECONCILE_IN_PROGRESS)) {
          return reply.code(409).send({ code: e.code, message: e.message, requestId: req.id });
        }
        if (isAppError(e, ErrorCodes.RECONCILE_UNAVAILABLE)) {
          req.log.error({ err: e.cause }, 'reconciliation lock unavailable');
          reply.header('retry-after', '30');
          return reply.code(503).send({ code: e.code, message: e.message, requestId: req.id });
        }
        throw e;
      }
    },
  );
};
