import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetricsRegistry, registerQueueDepthGauge } from '@mcb/core/metrics';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv } from '@mcb/testkit';
import { Queue } from 'bullmq';

const env = useTestEnv();
let connection: Redis;
let queue: Queue;

beforeAll(async () => {
  connection = createRedis(env.redisUrl, 'worker');
  queue = new Queue('callbacks', { connection, prefix: env.prefix });
});
afterAll(async () => {
  await queue?.close();
  await connection?.quit();
});

describe('registerQueueDepthGauge', () => {
  it('reports jobs per state at scrape time, and mcb_queue_depth_up 0 when Redis does not answer', async () => {
    const registry = createMetricsRegistry('test');
    const broken = { name: 'broken', getJobCounts: async () => Promise.reject(new Error('Connection is closed')) };
    registerQueueDepthGauge(registry, [queue, broken]);
    await queue.add('payin', { n: 1 });
    await queue.add('payin', { n: 2 });
    await queue.add('payin', { n: 3 }, { delay: 60_000 });

    const text = await registry.metrics();
    expect(text).toContain('mcb_queue_jobs{queue="callbacks",state="waiting",app="test"} 2');
    expect(text).toContain('mcb_queue_jobs{queue="callbacks",state="delayed",app="test"} 1');
    expect(text).toContain('mcb_queue_jobs{queue="callbacks",state="failed",app="test"} 0');
    expect(text).toContain('mcb_queue_depth_up{queue="callbacks",app="test"} 1');
    expect(text).toContain('mcb_queue_depth_up{queue="broken",app="test"} 0');
    expect(text).not.toContain('queue="broken",state=');

    await queue.add('payin', { n: 4 });
    expect(await registry.metrics()).toContain('mcb_queue_jobs{queue="callbacks",state="waiting",app="test"} 3');
  });

  it('labels each queue with its merchant when told whose it is', async () => {
    const registry = createMetricsRegistry('test');
    const other = { name: 'callbacks-b', getJobCounts: async () => ({ waiting: 7 }) };
    registerQueueDepthGauge(registry, [queue, other], { merchantOf: (q) => (q === other ? 'b' : 'default') });
    const text = await registry.metrics();
    expect(text).toMatch(/mcb_queue_jobs\{queue="callbacks",state="waiting",merchant="default",app="test"\} \d+/);
    expect(text).toContain('mcb_queue_jobs{queue="callbacks-b",state="waiting",merchant="b",app="test"} 7');
    expect(text).toContain('mcb_queue_depth_up{queue="callbacks-b",merchant="b",app="test"} 1');
  });
});
