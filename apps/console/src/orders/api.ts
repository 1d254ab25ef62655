import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../operators/operator.ts';
import { errorBodySchema, merchantOrderNoSchema, reasonSchema } from '../schemas.ts';
import { replayJob, type ReplayJobDeps } from './replay-job.ts';

export const jobParams = z.object({ merchantOrderNo: merchantOrderNoSchema, jobId: z.string().min(1).max(200) });

/** POST /api/orders/{merchantOrderNo}/jobs/{jobId}/replay: "Replay this job" (replay-job.ts has the rules). */
export const ordersJobsApi: FastifyPluginAsyncZod<ReplayJobDeps> = async (app, deps) => {
  app.post(
    '/api/orders/:merchantOrderNo/jobs/:jobId/replay',
    {
      schema: {
        summary: "Replay one failed job of the order",
        description:
          'Sends the job, failed for good, back to the queue with a fresh retry budget (the attempt count reset). Role operator; `reason` required; audited as `queue.retry` (details `via: order-page`). 409 JOB_NOT_FAILED when the job is not failed.',
        tags: ['orders'],
        params: jobParams,
        body: z.strictObject({ reason: reasonSchema.optional() }).optional(),
        response: {
          200: z.object({ jobId: z.string(), attemptsBefore: z.number().int().describe('Attempts the job had used before the replay') }),
          400: errorBodySchema,
          403: errorBodySchema,
          404: errorBodySchema,
          409: errorBodySchema,
        },
      },
    },
    async (req) => replayJob(deps, actorOf(req), req.params.merchantOrderNo, req.params.jobId, req.body?.reason),
  );
};
