import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { useTestEnv } from '@mcb/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { orderState } from './helpers/db-checks.ts';
import { startFakePlatform, type FakePlatform } from './helpers/fake-platform.ts';
import { createOrder, MERCHANT_NO, payinEvent, platformOrder, uid } from './helpers/fixtures.ts';
import { startHarness, type Harness } from './helpers/harness.ts';

const env = useTestEnv();
const FIXTURE = fileURLToPath(new URL('./fixtures/worker-process.ts', import.meta.url));
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
  const child = spawn(process.execPath, [FIXTURE], {
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
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
afterAll(async () => {
  await platform?.close();
});

describe('a worker that dies after the commit but before the acknowledgement', () => {
  it('runs the job again on another worker and the credit stays single', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '500' });
    platform.setOrder(platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '500' }));

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

  it('a worker process that is not told to die completes the job and exits cleanly on SIGTERM', async () => {
    const no = `PI-${uid()}`;
    await createOrder(env.db.db, { merchantOrderNo: no, kind: 'payin', amount: '1' });
    platform.setOrder(platformOrder({ orderNo: `P${no}`, merchantOrderNo: no, type: 'payin', state: 6, amountJson: '1' }));
    const worker = startWorkerProcess({});
    await worker.ready;
    h = await startHarness(env, platform.url, { instances: 0 });
    const job = await h.settled((await h.add(payinEvent({ orderNo: `P${no}`, merchantOrderNo: no, fiatAmount: '1' }))).id!);
    expect(job.returnvalue).toMatchObject({ status: 'applied', outcome: 'credited' });
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
  });
});
