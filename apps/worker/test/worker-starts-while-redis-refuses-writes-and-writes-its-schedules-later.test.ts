import { createLogger } from '@mcb/core/logger';
import { createPlatformClient } from '@mcb/core/platform';
import { MaintenanceJobs, merchantKeys } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import {
  lineSink,
  MERCHANT_NO,
  startFakePlatform,
  startRespProxy,
  useTestEnv,
  waitFor,
  type FakePlatform,
  type RespProxy,
} from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMaintenanceWorker } from '../src/index.ts';

// A Redis that refuses writes for a while (NOREPLICAS while a replica resyncs under min-replicas-to-write, READONLY
// during a failover) must not stop a worker from starting: the fault run saw a restarted worker exit 1 because its
// maintenance schedules could not be written at that moment. A proxy refuses the scheduler writes until told not to.

const env = useTestEnv();
let fake: FakePlatform;
let proxy: RespProxy;
let refusing = true;

beforeAll(async () => {
  fake = await startFakePlatform();
  proxy = await startRespProxy(env.redisUrl, (args) =>
    refusing && args.some((a) => a.includes(':maintenance:repeat')) && args[0]?.startsWith('EVAL')
      ? { reply: new Error('NOREPLICAS Not enough good replicas to write.') }
      : { forward: true },
  );
});
afterAll(async () => {
  await proxy?.close();
  await fake?.close();
});

describe('the maintenance worker on a Redis that refuses writes at start', () => {
  it('starts anyway, logs the refusal once as JSON, and writes its schedules once Redis takes them', async () => {
    const sink = lineSink();
    const logger = createLogger({ name: 'schedules-test', destination: sink.destination });
    const connection = createRedis(proxy.url, 'worker');
    const platform = createPlatformClient({ baseUrl: fake.url, merchantNo: MERCHANT_NO, timeoutMs: 2000 });
    // 1. It starts: the refused schedules do not make creation throw.
    const maintenance = await createMaintenanceWorker({
      db: env.db.db,
      platform,
      logger,
      redis: connection,
      connection,
      prefix: env.prefix,
      lockKey: merchantKeys(env.prefix).sweepLock,
      merchantNo: MERCHANT_NO,
      settings: { minAgeMs: 600_000, maxAgeMs: 86_400_000, ratePerSecond: 10, batchSize: 100, concurrency: 1 },
    });
    try {
      expect(maintenance.worker.isRunning()).toBe(true);
      expect(await maintenance.queue.getJobSchedulers()).toEqual([]);
      expect(sink.lines.some((l) => l.includes('NOREPLICAS'))).toBe(true);
      // 2. Redis takes writes again: the schedules appear without a restart.
      refusing = false;
      await waitFor(async () => (await maintenance.queue.getJobSchedulers()).length === 2, {
        timeoutMs: 10_000,
        message: 'schedules never written',
      });
      expect((await maintenance.queue.getJobSchedulers()).map((s) => s.key).sort()).toEqual(
        [MaintenanceJobs.catalogRefresh, MaintenanceJobs.reconcile].sort(),
      );
      for (const line of sink.lines) expect(() => JSON.parse(line)).not.toThrow();
    } finally {
      await maintenance.close();
      connection.disconnect();
      await platform.close();
    }
  });
});
