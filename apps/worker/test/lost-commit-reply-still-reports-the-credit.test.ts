import { createLogger } from '@mcb/core/logger';
import type { ApplyOutcome } from '@mcb/settlement';
import {
  createOrder,
  lineSink,
  payinEvent,
  platformOrder,
  startLostCommitReplyProxy,
  uid,
  waitFor,
} from '@mcb/testkit';
import { orderState, workerTest, type Harness } from '@mcb/testkit/worker';
import { describe, expect } from 'vitest';

const sink = lineSink();
const committed: ApplyOutcome[] = [];

const it = workerTest
  .extend('proxy', { scope: 'file' }, async ({ env }, { onCleanup }) => {
    const target = new URL(env.databaseUrl);
    const proxy = await startLostCommitReplyProxy(target.hostname, Number(target.port || 5432));
    onCleanup(() => proxy.close());
    return proxy;
  })
  .extend('harnessOptions', { scope: 'file' }, ({ env, proxy }) => {
    const through = new URL(env.databaseUrl);
    through.hostname = '127.0.0.1';
    through.port = String(proxy.port);
    return {
      workerDatabaseUrl: through.toString(),
      logger: createLogger({ name: 'lost-reply-test', level: 'info', destination: sink.destination }),
      afterCommit: (outcome: ApplyOutcome) => void committed.push(outcome),
    };
  });

/** The worker's count of jobs that ended credited. */
async function creditedCount(h: Harness): Promise<number> {
  return (
    (await h.metrics.jobs.get()).values.find((v) => v.labels.kind === 'payin' && v.labels.outcome === 'credited')
      ?.value ?? 0
  );
}

/** The order id a settled job's outcome names. */
const orderIdOf = (job: { returnvalue: unknown }) => (job.returnvalue as { orderId?: number }).orderId;

describe('a COMMIT whose reply is lost', () => {
  it('is reported by the job that credited: applied, afterCommit, the credited line and the metric', async ({
    env,
    platform,
    h,
    proxy,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '64.10' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '64.10' }),
    );
    // 1. The next COMMIT reaches the server and commits; its reply is swallowed and the connection cut.
    const lost = proxy.armOnce();
    const added = await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '64.10' }));
    const job = await h.settled(added.id!);
    await lost;
    // 2. The job that credited says so, in its first attempt, and everything that follows a credit ran once.
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBe(1);
    expect(committed.filter((c) => c.status === 'applied' && c.orderId === orderIdOf(job))).toHaveLength(1);
    expect(sink.lines.filter((l) => l.includes(`order ${no} credited`))).toHaveLength(1);
    expect(await creditedCount(h)).toBe(1);
    // 3. Credited once.
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('credited');
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toHaveLength(1);
  });

  it('is reported by the same job on its next attempt when Postgres could not be asked at once (DB_COMMIT_IN_DOUBT)', async ({
    env,
    platform,
    h,
    proxy,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '12.34' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '12.34' }),
    );
    const before = await creditedCount(h);
    // 1. The COMMIT's reply is lost and Postgres is unreachable right after (as while it restarts).
    const lost = proxy.armOnce({ thenRefuse: true });
    const added = await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '12.34' }));
    await lost;
    // 2. The attempt fails with the receipt it may have committed (a job note says so); Postgres comes back.
    await waitFor(
      async () =>
        (await h.queue.getJobLogs(added.id!)).logs.some((l) => l.includes('DB_COMMIT_IN_DOUBT')) ? true : undefined,
      {
        message: 'the in-doubt attempt noted on the job',
      },
    );
    await proxy.restore();
    // 3. The next attempt finds that receipt: it is this job's credit, reported as such, once.
    const job = await h.settled(added.id!);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBeGreaterThan(1);
    expect(committed.filter((c) => c.status === 'applied' && c.orderId === orderIdOf(job))).toHaveLength(1);
    expect(sink.lines.filter((l) => l.includes(`order ${no} credited`))).toHaveLength(1);
    expect(await creditedCount(h)).toBe(before + 1);
    const s = await orderState(env.db.db, no);
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toHaveLength(1);
  });

  it('is never taken as committed when the transaction rolled back (its COMMIT never arrived): the job credits on its next attempt', async ({
    env,
    platform,
    h,
    proxy,
  }) => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '31.40' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '31.40' }),
    );
    const before = await creditedCount(h);
    // 1. The COMMIT is lost on its way and the connection cut: Postgres rolls back; the client sees a failed COMMIT,
    //    asks for the transaction's receipts and finds none.
    const lost = proxy.armOnce({ commitNeverArrives: true });
    const added = await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '31.40' }));
    await lost;
    // 2. That attempt fails (nothing was written); the next one credits. Had the rollback been taken for a commit,
    //    the job would have completed as applied on its first attempt with nothing in the ledger.
    const job = await h.settled(added.id!);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    expect(job.attemptsMade).toBeGreaterThan(1);
    const s = await orderState(env.db.db, no);
    expect(s.order.status).toBe('credited');
    expect(s.ledger).toHaveLength(1);
    expect(s.receipts).toHaveLength(1);
    expect(committed.filter((c) => c.status === 'applied' && c.orderId === orderIdOf(job))).toHaveLength(1);
    expect(await creditedCount(h)).toBe(before + 1);
  });
});
