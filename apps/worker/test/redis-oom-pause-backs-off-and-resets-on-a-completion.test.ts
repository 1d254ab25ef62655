import { createLogger } from '@mcb/core/logger';
import { createMetricsRegistry } from '@mcb/core/metrics';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createWorkerMetrics } from '../src/metrics.ts';
import { createRedisOomPause } from '../src/redis-oom-pause.ts';

// The pause alone, with a stand-in for the fetch loops and fake timers: each OOM refusal while fetching pauses it for
// twice as long as the last (0.5 s first, 30 s at most), refusals during a pause only count, and a completed job
// brings the next pause back to 0.5 s. The real Redis at maxmemory is test/reliability/redis-at-maxmemory-*.

const oom = () => new Error("OOM command not allowed when used memory > 'maxmemory'.");
let calls: string[];
const fetching = {
  pause: async () => void calls.push('pause'),
  resume: async () => void calls.push('resume'),
};

beforeEach(() => {
  calls = [];
  vi.useFakeTimers();
});
afterEach(() => vi.useRealTimers());

describe('the pause while Redis is out of memory', () => {
  it('pauses fetching with a growing backoff, counts every refusal, and resets after a completion', async () => {
    const metrics = createWorkerMetrics(createMetricsRegistry('oom-test'));
    const pause = createRedisOomPause({ fetching, logger: createLogger({ name: 't', level: 'silent' }), metrics });
    const backoff = async () => (await metrics.redisOomBackoff.get()).values[0]?.value;

    expect(pause.refused(new Error('Connection is closed.'))).toBe(false);
    expect(calls).toEqual([]);

    // 1. A refusal pauses fetching for 0.5 s; a second one during the pause is counted, nothing more.
    expect(pause.refused(oom())).toBe(true);
    expect(pause.refused(oom())).toBe(true);
    expect(calls).toEqual(['pause']);
    expect(await backoff()).toBe(0.5);
    await vi.advanceTimersByTimeAsync(499);
    expect(calls).toEqual(['pause']);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toEqual(['pause', 'resume']);

    // 2. The next refusals pause for 1 s, then 2 s ... up to 30 s.
    const pauses: number[] = [];
    for (let i = 0; i < 8; i++) {
      pause.refused(oom());
      pauses.push((await backoff())!);
      await vi.advanceTimersByTimeAsync(30_000);
    }
    expect(pauses).toEqual([1, 2, 4, 8, 16, 30, 30, 30]);
    expect((await metrics.redisOom.get()).values[0]?.value).toBe(10);

    // 3. A completed job: Redis takes writes again, the next pause is the shortest.
    pause.completed();
    expect(await backoff()).toBe(0);
    pause.refused(oom());
    expect(await backoff()).toBe(0.5);

    // 4. Closing: the pending resume is dropped.
    pause.stop();
    const before = calls.length;
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toHaveLength(before);
  });
});
