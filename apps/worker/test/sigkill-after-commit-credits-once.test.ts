import { spawn, type ChildProcess } from 'node:child_process';
import {
  createOrder,
  type FakePlatform,
  MERCHANT_NO,
  payinEvent,
  platformOrder,
  startFakePlatform,
  uid,
  useTestEnv,
} from '@mcb/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { orderState, startHarness, WORKER_PROCESS_SCRIPT, type Harness } from '@mcb/testkit/worker';

const env = useTestEnv();
let platform: FakePlatform;
const children: ChildProcess[] = [];
let h: Harness | undefined;

interface WorkerProcess {
  child: ChildProcess;
  /** Resolves when the process prints "ready" (it consumes the queue). */
  ready: Promise<void>;
  /** The signal that ended it, or its exit code. */
  exited: Promise<NodeJS.Signals | number | null>;
}

function startWorkerProcess(extra: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, [WORKER_PROCESS_SCRIPT], {
    env: {
      ...process.env,
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      QUEUE_PREFIX: env.prefix,
      PLATFORM_BASE_URL: platform.url,
      MERCHANT_NO,
      ...extra,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
    child.once('exit', (code, signal) => {
      if (code) console.error(`worker-process exited ${code}: ${stderr}`);
      resolve(signal ?? code);
    }),
  );
  const ready = new Promise<void>((resolve) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('ready\n')) resolve();
    });
  });
  return { child, ready, exited };
}

beforeAll(async () => {
  platform = await startFakePlatform();
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
afterAll(async () => {
  await platform?.close();
});

describe('a worker that dies after the commit but before the acknowledgement', () => {
  it('runs the job again on another worker and the credit stays single', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '500' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '500' }),
    );

    // 1. A worker process that kills itself with SIGKILL right after the transaction commits.
    const victim = startWorkerProcess({
      WORKER_KILL_AFTER_COMMIT: '1',
      WORKER_LOCK_DURATION_MS: '1000',
      WORKER_STALLED_INTERVAL_MS: '300',
    });
    // A queue-only harness (no workers) to add the job.
    h = await startHarness(env, platform.url, { instances: 0 });
    const added = await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '500' }));
    expect(await victim.exited).toBe('SIGKILL');

    // 2. The credit is committed, but the job was never acknowledged: it is still active, holding a dead lock.
    const committed = await orderState(env.db.db, no);
    expect(committed.order.status).toBe('credited');
    expect(committed.ledger).toHaveLength(1);
    expect(await (await h.queue.getJob(added.id!))!.getState()).toBe('active');

    // 3. A healthy worker finds the stalled job, runs it again, and the receipt makes it a duplicate.
    await h.close();
    h = await startHarness(env, platform.url, { lockDurationMs: 1000, stalledIntervalMs: 300 });
    const job = await h.settled(added.id!, 20_000);
    expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });
    expect(job.processedBy).toBe('worker-0');

    const after = await orderState(env.db.db, no);
    expect(after.ledger).toHaveLength(1);
    expect(after.receipts).toHaveLength(1);
    expect(after.events).toHaveLength(1);
  });

  it('re-runs every job of a group-committed batch as a duplicate when the worker dies after the batch commit', async () => {
    const nos = Array.from({ length: 12 }, () => `PI-${uid()}`);
    for (const no of nos) {
      await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '7' });
      platform.setOrder(
        platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '7' }),
      );
    }
    // 1. The jobs wait in the queue before the worker starts, so it takes them all at once and commits them together.
    h = await startHarness(env, platform.url, { instances: 0 });
    const added = await Promise.all(
      nos.map((no) => h!.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '7' }))),
    );
    // The first credit commits alone (the batcher is idle); the others gather meanwhile and commit together. The
    // worker dies right after the second commit, before it acknowledges any job of that batch. Get order answers all
    // twelve together once the last has asked, so the commits gather however slowly this machine runs the worker.
    platform.holdReplies(nos.length);
    const victim = startWorkerProcess({
      WORKER_KILL_AFTER_COMMIT: '2',
      WORKER_CONCURRENCY: String(nos.length),
      WORKER_LOCK_DURATION_MS: '1000',
      WORKER_STALLED_INTERVAL_MS: '300',
    });
    expect(await victim.exited).toBe('SIGKILL');

    // 2. A batch of several events is committed in one transaction, and its jobs are still active (unacknowledged).
    const { rows } = await env.db.pool.query<{ order_no: string; xmin: string }>(
      'SELECT order_no, xmin::text FROM callback_receipts WHERE merchant_order_no = ANY($1)',
      [nos],
    );
    const perTransaction = new Map<string, number>();
    for (const r of rows) perTransaction.set(r.xmin, (perTransaction.get(r.xmin) ?? 0) + 1);
    expect(Math.max(...perTransaction.values())).toBeGreaterThan(1);
    const committed = new Set(rows.map((r) => r.order_no));
    const unacknowledged = new Set<string>();
    for (const a of added) {
      const job = (await h.queue.getJob(a.id!))!;
      if ((await job.getState()) === 'active' && committed.has(job.data.orderNo)) unacknowledged.add(job.data.orderNo);
    }
    expect(unacknowledged.size).toBeGreaterThan(1);

    // 3. A healthy worker runs them again: each unacknowledged committed job is a duplicate; each order credited once.
    await h.close();
    h = await startHarness(env, platform.url, { lockDurationMs: 1000, stalledIntervalMs: 300 });
    const jobs = await Promise.all(added.map((a) => h!.settled(a.id!, 20_000)));
    for (const job of jobs) {
      const orderNo = (job.data as { orderNo: string }).orderNo;
      if (unacknowledged.has(orderNo))
        expect(job.returnvalue).toEqual({ status: 'duplicate', reason: 'receipt-exists' });
      else expect(job.returnvalue).toMatchObject({ status: 'applied' });
    }
    for (const no of nos) {
      const s = await orderState(env.db.db, no);
      expect(s.order.status).toBe('credited');
      expect(s.ledger).toHaveLength(1);
      expect(s.receipts).toHaveLength(1);
    }
  });

  it('a worker process that is not told to die completes the job and exits cleanly on SIGTERM', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '1' });
    platform.setOrder(
      platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '1' }),
    );
    const worker = startWorkerProcess({});
    await worker.ready;
    h = await startHarness(env, platform.url, { instances: 0 });
    const job = await h.settled(
      (await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '1' }))).id!,
    );
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });
});
