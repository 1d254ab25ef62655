import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackArrivals, reviews } from '@mcb/core/db';
import { createLogger } from '@mcb/core/logger';
import { callbackJobSchema } from '@mcb/core/queue';
import { applyEvent } from '@mcb/settlement';
import { createOrder, payinEvent, platformOrder, uid, useTestEnv, waitFor } from '@mcb/testkit';
import { and, eq } from 'drizzle-orm';
import { OPERATORS, bearer } from '../../apps/console/test/helpers/operators.ts';
import { startOpsStack, type OpsStack } from './helpers/ops-harness.ts';

// The dry run reports settlement's own verdict (decideEvent), not a copy of its checks: where the worker would open a
// review, so does the preview, even for a failed job whose pair was applied meanwhile from another content.

const env = useTestEnv();
let stack: OpsStack;
const logger = createLogger({ name: 'dry-run-verdict-test', level: 'silent' });

beforeAll(async () => {
  stack = await startOpsStack(env, { worker: { concurrency: 4 }, consoleDeps: { operators: OPERATORS } });
});
afterAll(async () => {
  await stack?.close();
});

describe('the replay dry run', () => {
  it('says "into review" for a failed job whose pair was applied from another content, and the replay reviews it', async () => {
    // 1. A pay-in callback claiming 31.00 that failed for good (Get order answered 500 on its one attempt).
    const no = uid();
    const o = { merchantOrderNo: `V-${no}`, orderNo: `PV-${no}` };
    await createOrder(env.db.db, { ...o, kind: 'payin', amount: '30.00' });
    stack.platform.failNext(o.merchantOrderNo, 1, 500);
    const event = payinEvent({ ...o, fiatAmount: '31.00' });
    const jobId = await stack.add(event, 1);
    await waitFor(
      async () =>
        (
          await env.db.db
            .select()
            .from(callbackArrivals)
            .where(and(eq(callbackArrivals.jobId, jobId), eq(callbackArrivals.status, 'failed')))
        )[0],
      { message: `job ${jobId} did not fail` },
    );
    // 2. The same pair applied meanwhile from the genuine callback, 30.00 (Get order confirms the amount; a Quantity
    // alone, which it does not confirm, would make the failed job a duplicate with a note, not a review).
    stack.platform.setOrder(platformOrder({ ...o, type: 'payin', state: 6, amountJson: '30.00' }));
    const other = callbackJobSchema.parse({ ...event, fiatAmount: '30.00' });
    expect(await applyEvent(other, { db: env.db.db, platform: stack.client, logger })).toMatchObject({
      status: 'applied',
    });

    // 3. The dry run: the worker would find the pair's receipt and a callback that differs from it.
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api/replays',
      headers: bearer('operator'),
      payload: { filter: { merchantOrderNo: o.merchantOrderNo }, dryRun: true },
    });
    expect(res.statusCode, res.body).toBe(200);
    const { plan } = res.json() as { plan: { counts: Record<string, number>; samples: Record<string, unknown[]> } };
    expect(plan.counts).toMatchObject({ willReview: 1, alreadyApplied: 0, willApply: 0 });
    expect(plan.samples.willReview).toEqual([expect.objectContaining({ jobId, code: 'VERIFY_DIFFERS_FROM_APPLIED' })]);

    // 4. The replay does what the dry run said: a review of that code, nothing paid twice.
    const started = await stack.app.inject({
      method: 'POST',
      url: '/api/replays',
      headers: bearer('operator'),
      payload: { filter: { merchantOrderNo: o.merchantOrderNo }, reason: 'check the preview' },
    });
    expect(started.statusCode, started.body).toBe(202);
    const review = await waitFor(
      async () => (await env.db.db.select().from(reviews).where(eq(reviews.orderNo, o.orderNo)))[0],
      { timeoutMs: 20_000, message: 'the replayed job opened no review' },
    );
    expect(review.reasonCode).toBe('VERIFY_DIFFERS_FROM_APPLIED');
  });
});
