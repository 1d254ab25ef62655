import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createFleet, readFleetState } from '@mcb/core/platform';
import {
  callbackJobId,
  callbackJobOptions,
  MAINTENANCE_QUEUE,
  MaintenanceJobs,
  type CallbackJobInput,
  merchantKeys,
} from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { acquireSweepLock } from '@mcb/settlement';
import { freePort, startOwnCluster, uniquePrefix, useTestEnv, waitFor, type OwnCluster } from '@mcb/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createTestKeys } from '../reliability/helpers/keys.ts';
import { startNodeProcess, type NodeProcess } from '../reliability/helpers/node-process.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERCHANT_NO, startPipeline, type Pipeline } from './helpers/pipeline.ts';

// The whole pipeline on a 3-master Redis Cluster (AOF always, real redis-server processes on free ports): ingest,
// worker, console and dashboard all reach Redis through REDIS_CLUSTER_NODES; the hash tag in the queue prefix keeps
// every key of ours in one slot, so BullMQ's multi-key scripts, WAIT and the sweep lock work as on one node.
describe('the pipeline on a 3-master Redis Cluster', () => {
  const env = useTestEnv();
  let cluster: OwnCluster;
  let p: Pipeline;

  beforeAll(async () => {
    cluster = await startOwnCluster(3);
    const nodes = cluster.ports.map((port) => ({ host: '127.0.0.1', port }));
    p = await startPipeline(env, { redis: { kind: 'cluster', nodes }, prefix: `{${uniquePrefix('cluster')}}` });
  }, 60_000);
  afterAll(async () => {
    await p?.close();
    await cluster?.destroy();
  });

  async function drained(): Promise<void> {
    await waitFor(
      async () =>
        Object.values(await p.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized')).every((n) => n === 0),
      {
        message: 'queue not drained',
      },
    );
  }

  it('acknowledges callbacks, credits a pay-in once although every attempt arrives four times, and refunds a refused payout once', async () => {
    await p.registerPayin('CL-PAYIN-1', '250.40');
    await p.registerPayout('CL-PAYOUT-1', '90.00');
    const payin = p.sim.createPayin({
      merchantOrderNo: 'CL-PAYIN-1',
      currency: 'INR',
      amount: '250.40',
      faults: { duplicate: 4 },
    });
    const payout = p.sim.createPayout({
      merchantOrderNo: 'CL-PAYOUT-1',
      currency: 'INR',
      amount: '90.00',
      faults: { duplicate: 2 },
    });
    const deliveries = [
      p.sim.finalize(payin.orderNo, 6).deliveries[0]!,
      p.sim.finalize(payout.orderNo, 5).deliveries[0]!,
    ];
    for (const d of deliveries) {
      const settled = await p.sim.settled(d);
      expect(settled.status).toBe('delivered');
      expect(settled.attempts.every((a) => a.status === 200 && a.bodySnippet === 'success')).toBe(true);
    }
    await waitFor(async () => (await p.orderState('CL-PAYIN-1')).status === 'credited', {
      message: 'pay-in not credited',
    });
    await waitFor(async () => (await p.orderState('CL-PAYOUT-1')).status === 'refused', {
      message: 'payout not refused',
    });
    await drained();
    expect((await p.orderState('CL-PAYIN-1')).ledger).toEqual([{ entryType: 'payin_credit', amount: '250.4' }]);
    expect((await p.orderState('CL-PAYOUT-1')).ledger).toEqual([{ entryType: 'payout_refund', amount: '90' }]);
    const ids = (await p.queue.getJobs(['completed'])).map((j) => j.id);
    expect(ids).toEqual(expect.arrayContaining([`payin-${payin.orderNo}-6`, `payout-${payout.orderNo}-5`]));
    expect(ids.filter((id) => id?.includes(payin.orderNo))).toHaveLength(1);
  });

  it('keeps every key of the queue on the one master that holds the hash tag', async () => {
    const home = await cluster.portOfKey(p.prefix);
    const counts = new Map<number, number>();
    for (const port of cluster.ports) {
      const node = new Redis(port, '127.0.0.1');
      try {
        let cursor = '0';
        let n = 0;
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', `${p.prefix}:*`, 'COUNT', 1000);
          cursor = next;
          n += keys.length;
        } while (cursor !== '0');
        counts.set(port, n);
      } finally {
        node.disconnect();
      }
    }
    expect(counts.get(home)).toBeGreaterThan(0);
    expect([...counts].filter(([port, n]) => port !== home && n > 0)).toEqual([]);
  });

  it('retries a failed job from the dashboard, which then credits once; the late delivery of the same callback is dropped', async () => {
    // 1. The platform completes the order but holds its callback; a job for it fails at once (Get order down).
    await p.registerPayin('CL-RETRY-1', '12.00');
    const order = p.sim.createPayin({ merchantOrderNo: 'CL-RETRY-1', currency: 'INR', amount: '12.00' });
    p.sim.setFaults({ outOfOrder: true, apiDown: 'error' });
    p.sim.finalize(order.orderNo, 6);
    const event: CallbackJobInput = {
      kind: 'payin',
      orderNo: order.orderNo,
      merchantNo: MERCHANT_NO,
      merchantOrderNo: 'CL-RETRY-1',
      state: 6,
      payTime: new Date().toISOString(),
      quantity: order.quantity!,
      fiatAmount: '12.00',
      receivedAt: new Date().toISOString(),
      source: 'callback',
    };
    const jobId = callbackJobId('payin', order.orderNo, 6);
    await p.queue.add('payin', event, { ...callbackJobOptions, jobId, attempts: 1 });
    await waitFor(async () => (await p.queue.getJobState(jobId)) === 'failed', { message: 'the job did not fail' });
    expect((await p.orderState('CL-RETRY-1')).status).toBe('pending');

    // 2. The platform is back; the operator retries the job from the dashboard.
    p.sim.setFaults({ apiDown: 'off' });
    const retried = await p.operator('PUT', `/queues/api/queues/callbacks/${jobId}/retry`);
    expect(retried.statusCode).toBe(204);
    await waitFor(async () => (await p.orderState('CL-RETRY-1')).status === 'credited', {
      message: 'not credited after the retry',
    });

    // 3. The held callback arrives after all: acknowledged, and its job id makes it a no-op.
    p.sim.setFaults({ outOfOrder: false });
    const [delivery] = p.sim.deliveriesOf(order.orderNo);
    expect((await p.sim.settled(delivery!)).status).toBe('delivered');
    await drained();
    expect((await p.orderState('CL-RETRY-1')).ledger).toEqual([{ entryType: 'payin_credit', amount: '12' }]);
  });

  it('runs one reconciliation sweep at a time: the console is refused while a worker holds the lock, and sweeps after', async () => {
    const held = await acquireSweepLock(p.workerRedis, { key: merchantKeys(p.prefix).sweepLock });
    expect(held).toBeDefined();
    try {
      expect(await acquireSweepLock(p.workerRedis, { key: merchantKeys(p.prefix).sweepLock })).toBeUndefined();
      const refused = await p.operator('POST', '/api/reconcile', {});
      expect(refused.statusCode).toBe(409);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'RECONCILE_IN_PROGRESS' });
    } finally {
      await held!.release();
    }
    const swept = await p.operator('POST', '/api/reconcile', {});
    expect(swept.statusCode).toBe(200);
    expect(JSON.parse(swept.body)).toMatchObject({ stoppedEarly: false });
  });

  it('starts ingest and worker processes from REDIS_CLUSTER_NODES alone: ingest ready, the maintenance schedulers upserted once', async () => {
    const logDir = mkdtempSync(join(tmpdir(), 'mcb-cluster-procs-'));
    const prefix = `{${uniquePrefix('cluster-procs')}}`;
    const common = { REDIS_CLUSTER_NODES: cluster.nodes, QUEUE_PREFIX: prefix, MERCHANT_NO, LOG_LEVEL: 'info' };
    const keys = createTestKeys();
    const procs: NodeProcess[] = [];
    const admin = createRedis(
      { kind: 'cluster', nodes: cluster.ports.map((port) => ({ host: '127.0.0.1', port })) },
      'worker',
    );
    const maintenance = new Queue(MAINTENANCE_QUEUE, { connection: admin, prefix });
    try {
      const ingestPort = await freePort();
      procs.push(
        startNodeProcess(
          'ingest',
          'apps/ingest/src/main.ts',
          {
            ...common,
            MERCHANT_PRIVATE_KEY_FILE: keys.privateKeyFile,
            INGEST_HOST: '127.0.0.1',
            INGEST_PORT: String(ingestPort),
            INGEST_METRICS_PORT: '0',
            INGEST_WORKERS: '1',
          },
          join(logDir, 'ingest.log'),
        ),
      );
      for (const n of [1, 2]) {
        procs.push(
          startNodeProcess(
            `worker-${n}`,
            'apps/worker/src/main.ts',
            {
              ...common,
              DATABASE_URL: env.databaseUrl,
              PLATFORM_BASE_URL: p.sandboxUrl,
              PLATFORM_ALLOW_HTTP: 'true',
              WORKER_METRICS_PORT: '0',
            },
            join(logDir, `worker-${n}.log`),
          ),
        );
      }
      await waitFor(
        async () => (await fetch(`http://127.0.0.1:${ingestPort}/readyz`).catch(() => undefined))?.status === 200,
        {
          timeoutMs: 30_000,
          message: `ingest not ready on the cluster (log: ${logDir}/ingest.log)`,
        },
      );
      await Promise.all(procs.slice(1).map((w) => w.waitForOutput(/worker started/, 30_000)));
      const schedulers = await maintenance.getJobSchedulers();
      expect(schedulers.map((j) => j.name).sort()).toEqual(
        [MaintenanceJobs.catalogRefresh, MaintenanceJobs.reconcile].sort(),
      );
      // Both workers share one Get order budget through the cluster: the fleet's script runs in the prefix's slot.
      await waitFor(async () => (await readFleetState(admin, merchantKeys(prefix).fleet)).processes === 2, {
        timeoutMs: 10_000,
        message: 'the workers did not join the fleet budget',
      });
      const fleet = createFleet({ redis: admin, keys: merchantKeys(prefix).fleet, maxRps: 50 });
      await Promise.all(Array.from({ length: 10 }, () => fleet.take()));
      expect(fleet.status()).toMatchObject({ fallback: false, alive: 3 });
      await fleet.close();
      rmSync(logDir, { recursive: true, force: true });
    } finally {
      await Promise.all(procs.map((proc) => proc.stop(5000)));
      await maintenance.close();
      admin.disconnect();
      keys.remove();
    }
  }, 90_000);
});
