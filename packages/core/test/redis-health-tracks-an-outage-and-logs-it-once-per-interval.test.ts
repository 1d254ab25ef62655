import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry } from '@mcb/core/metrics';
import { createRedis, createRedisHealth } from '@mcb/core/redis';
import { lineSink, startOwnRedis, waitFor } from '@mcb/testkit';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';

const gauge = async (registry: ReturnType<typeof createMetricsRegistry>, name: string) =>
  Number(new RegExp(`^${name}\\{connection="w",app="t"\\} (\\d+)$`, 'm').exec(await registry.metrics())?.[1]);

describe('createRedisHealth', () => {
  it('goes not-ready with the time Redis went away, logs its errors once per interval (queues copies only counted), and recovers', async () => {
    const redis = await startOwnRedis();
    const sink = lineSink();
    const registry = createMetricsRegistry('t');
    const health = createRedisHealth({
      logger: createLogger({ name: 't', destination: sink.destination }),
      registry,
      logIntervalMs: 60_000,
    });
    const client = createRedis(redis.url, 'worker');
    health.watch(client, 'w');
    let errorsSeen = 0;
    client.on('error', () => void errorsSeen++);
    const queue = new Queue('health', { connection: client, prefix: 'h' });
    health.listen(queue, 'health queue');
    let queueErrors = 0;
    queue.on('error', () => void queueErrors++);
    try {
      // 1. Up: ready, gauges say so.
      await waitFor(() => health.readiness().ready, { message: 'never ready' });
      expect(await gauge(registry, 'mcb_redis_up')).toBe(1);
      expect(await gauge(registry, 'mcb_redis_down_since_seconds')).toBe(0);

      // 2. Redis dies: not ready, down since about now; several reconnect failures, one line.
      const killedAt = Date.now();
      await redis.kill();
      await waitFor(() => !health.readiness().ready);
      await waitFor(() => sink.lines.length >= 1 && (health.downSince() ?? 0) > 0);
      expect(health.downSince()).toBeGreaterThanOrEqual(killedAt - 1000);
      expect(health.readiness().checks['redis w']).toMatch(/^unreachable since /);
      expect(await gauge(registry, 'mcb_redis_down_since_seconds')).toBe(Math.floor(health.downSince()! / 1000));
      expect(await gauge(registry, 'mcb_redis_up')).toBe(0);
      await waitFor(() => errorsSeen >= 3 && queueErrors >= 3, { message: 'fewer than 3 failed reconnects' });

      // 3. Back: ready again, the gauge back at 0, one line saying for how long it was gone.
      await redis.start();
      await waitFor(() => health.readiness().ready, { timeoutMs: 15_000, message: 'not ready after Redis returned' });
      expect(health.downSince()).toBeUndefined();
      expect(await gauge(registry, 'mcb_redis_down_since_seconds')).toBe(0);
      const lines = sink.lines.map(
        (l) => JSON.parse(l) as { msg: string; level: number; errorsSinceLastLine?: number; downForMs?: number },
      );
      const errors = lines.filter((l) => l.level >= 50);
      // One line for the whole outage (interval 60 s here): the connection's own; the queue's copies were counted only.
      expect(errors.map((l) => l.msg)).toEqual([expect.stringMatching(/^Redis connection w: /)]);
      expect(lines.at(-1)?.msg).toBe('Redis connection w is back');
      expect(lines.at(-1)?.downForMs).toBeGreaterThan(0);
    } finally {
      await queue.close().catch(() => undefined);
      client.disconnect();
      await redis.destroy();
    }
  });
});
