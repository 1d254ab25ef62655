import { payinEvent, uid, waitFor } from '@mcb/testkit';
import { workerTest } from '@mcb/testkit/worker';
import { Redis } from 'ioredis';
import { describe, expect } from 'vitest';

// Forged callbacks for orders we never registered wait ORDER_GRACE_PERIOD in Redis (about 1 KiB each). Past
// WORKER_MAX_UNKNOWN_WAITING such events, a new one is decided at once (review, in Postgres) and its job removed.
const it = workerTest.extend(
  'harnessOptions',
  { scope: 'file' },
  {
    maxUnknownWaiting: 3,
    releaseReviewedJobIds: false,
    orderGracePeriodMs: 600_000,
    // Deferred jobs stay delayed while the test reads them.
    backoff: { baseMs: 60_000, capMs: 60_000, random: () => 1 },
  },
);

describe('events for unknown orders', () => {
  it('wait in Redis up to the cap; beyond it they go to review at once', async ({ env, h }) => {
    const events = Array.from({ length: 8 }, () => {
      const no = uid();
      return payinEvent({ orderNo: `P-UNK-${no}`, merchantOrderNo: `M-UNK-${no}`, fiatAmount: '5' });
    });
    // One at a time, so the count each one sees is deterministic.
    for (const event of events) {
      const job = await h.add(event);
      await waitFor(async () => (await job.isDelayed()) || (await job.isCompleted()), {
        message: `job ${job.id} not decided`,
      });
    }
    const states = await Promise.all(
      events.map(async (e) => (await h.queue.getJob(`payin-${e.orderNo}-6`))!.getState()),
    );
    expect(states.filter((s) => s === 'delayed')).toHaveLength(3);
    expect(states.filter((s) => s === 'completed')).toHaveLength(5);
    const { rows } = await env.db.pool.query(
      `select count(*) as n from reviews where reason_code = 'VERIFY_ORDER_UNKNOWN'`,
    );
    expect(Number(rows[0].n)).toBe(5);
    const client = new Redis(env.redisUrl);
    const waiting = await client
      .zcard(`${env.prefix}:callbacks:unknown-order-waiting`)
      .finally(() => client.disconnect());
    expect(waiting).toBe(3);
  });
});
