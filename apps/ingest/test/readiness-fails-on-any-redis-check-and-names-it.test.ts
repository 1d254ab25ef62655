import { describe, expect, it } from 'vitest';
import type { DurabilityReport } from '@mcb/core/redis';
import { readinessOf, type ReadinessInputs } from '../src/redis-gate.ts';

// /readyz is decided on the gate's last reads and a ping: ready only when every check allows callbacks, and each
// check says what it found, so an operator sees which one failed.
const report: DurabilityReport = {
  durable: true,
  mode: 'aof-always',
  problems: [],
  settings: { appendonly: 'yes', appendfsync: 'always', maxmemoryPolicy: 'noeviction', waitaof: true },
  replication: { required: 0, online: 0, ok: true },
};
const ready: ReadinessInputs = {
  redisOk: true,
  report,
  memory: { maxBytes: 0, headroom: 1 },
  memoryLow: false,
  allowVolatile: false,
  shuttingDown: false,
};

describe('readiness from the Redis gate', () => {
  it('is ready when every check passes, and says so per check', () => {
    expect(readinessOf(ready)).toEqual({
      ready: true,
      checks: {
        redis: 'ok',
        durability: 'aof-always',
        shutdown: 'no',
        replicas: 'not required',
        memory: 'no maxmemory',
      },
    });
  });

  it('is not ready when any one check fails, and that check names it', () => {
    const cases: Array<[Partial<ReadinessInputs>, string, string]> = [
      [{ redisOk: false }, 'redis', 'unreachable'],
      [{ report: { ...report, durable: false, mode: 'none' } }, 'durability', 'not durable'],
      [{ shuttingDown: true }, 'shutdown', 'shutting down'],
      [
        { report: { ...report, replication: { required: 2, online: 1, ok: false } } },
        'replicas',
        '1 online, 2 required',
      ],
      [
        { memory: { maxBytes: 100, headroom: 0.04 }, memoryLow: true },
        'memory',
        '4% free (below INGEST_REDIS_MIN_HEADROOM)',
      ],
    ];
    for (const [change, check, says] of cases) {
      const r = readinessOf({ ...ready, ...change });
      expect(r.ready, check).toBe(false);
      expect(r.checks[check]).toBe(says);
    }
  });

  it('volatile Redis, when allowed, is ready and says so', () => {
    const r = readinessOf({ ...ready, report: { ...report, durable: false, mode: 'none' }, allowVolatile: true });
    expect(r).toMatchObject({ ready: true, checks: { durability: 'volatile (allowed)' } });
  });
});
