import { describe, expect, it } from 'vitest';
import { hashTagOf, loadConfig } from '../src/config/index.ts';
import { describeRedisTarget, redisTargetOf } from '../src/redis.ts';

// Exactly one Redis topology (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES); anything else is a startup error
// that names the variables. On a cluster the queue prefix must hold a hash tag.
const base = { LOG_LEVEL: 'silent' };
const problemsOf = (env: Record<string, string>): string => {
  try {
    loadConfig({ ...base, ...env }, 'cli');
  } catch (e) {
    return (e as Error).message;
  }
  return '';
};

describe('the Redis settings', () => {
  it('take exactly one topology and name the variables otherwise', () => {
    expect(problemsOf({ REDIS_URL: 'redis://h:6379', REDIS_SENTINELS: 'h:26379', REDIS_SENTINEL_NAME: 'm' })).toMatch(
      /REDIS_URL, REDIS_SENTINELS: set exactly one Redis topology \(REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES\), not 2/,
    );
    expect(problemsOf({ REDIS_URL: 'redis://h:6379', REDIS_CLUSTER_NODES: 'h:7000', QUEUE_PREFIX: '{mcb}' })).toMatch(
      /REDIS_URL, REDIS_CLUSTER_NODES: set exactly one/,
    );
    expect(
      problemsOf({
        REDIS_SENTINELS: 'h:26379',
        REDIS_SENTINEL_NAME: 'm',
        REDIS_CLUSTER_NODES: 'h:7000',
        QUEUE_PREFIX: '{mcb}',
      }),
    ).toMatch(/REDIS_SENTINELS, REDIS_CLUSTER_NODES: set exactly one/);
    expect(problemsOf({ REDIS_SENTINELS: 'h:26379' })).toMatch(/REDIS_SENTINEL_NAME: required with REDIS_SENTINELS/);
    expect(problemsOf({ REDIS_SENTINELS: 'h', REDIS_SENTINEL_NAME: 'm' })).toMatch(
      /REDIS_SENTINELS: expected host:port/,
    );
    expect(problemsOf({ REDIS_SENTINEL_NAME: 'm' })).toMatch(/REDIS_SENTINEL_NAME: only with REDIS_SENTINELS/);
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'h:99999', QUEUE_PREFIX: '{mcb}' })).toMatch(
      /REDIS_CLUSTER_NODES: expected host:port/,
    );
  });

  it('refuse a cluster whose queue prefix holds no hash tag, and say why', () => {
    for (const prefix of [undefined, 'mcb', '{}mcb', 'mcb}{']) {
      const problems = problemsOf({
        REDIS_CLUSTER_NODES: 'a:7000,b:7001',
        ...(prefix === undefined ? {} : { QUEUE_PREFIX: prefix }),
      });
      expect(problems, String(prefix)).toMatch(
        /QUEUE_PREFIX: must hold a hash tag such as \{mcb\} with REDIS_CLUSTER_NODES, so that every key of a queue is in one slot/,
      );
    }
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'a:7000', QUEUE_PREFIX: 'shop-{mcb}' })).toBe('');
    // Without a cluster any prefix is fine.
    expect(problemsOf({ QUEUE_PREFIX: 'mcb' })).toBe('');
  });

  it('read the hash tag as Redis Cluster does: the first {...} with something inside', () => {
    expect(hashTagOf('{mcb}')).toBe('mcb');
    expect(hashTagOf('a{b}c{d}')).toBe('b');
    expect(hashTagOf('{}x')).toBeUndefined();
    expect(hashTagOf('mcb')).toBeUndefined();
    expect(hashTagOf('{mcb')).toBeUndefined();
  });

  it('become a target each process connects to, described without the password', () => {
    const sentinel = loadConfig(
      { ...base, REDIS_SENTINELS: 'a:26379, b:26380', REDIS_SENTINEL_NAME: 'mcb', REDIS_PASSWORD: 'pw' },
      'cli',
    );
    expect(redisTargetOf(sentinel)).toEqual({
      kind: 'sentinel',
      name: 'mcb',
      password: 'pw',
      sentinels: [
        { host: 'a', port: 26379 },
        { host: 'b', port: 26380 },
      ],
    });
    const cluster = loadConfig(
      { ...base, REDIS_CLUSTER_NODES: 'a:7000,[::1]:7001', REDIS_PASSWORD: 'pw', QUEUE_PREFIX: '{mcb}' },
      'cli',
    );
    const target = redisTargetOf(cluster);
    expect(target).toEqual({
      kind: 'cluster',
      password: 'pw',
      nodes: [
        { host: 'a', port: 7000 },
        { host: '::1', port: 7001 },
      ],
    });
    expect(describeRedisTarget(target)).toBe('cluster via a:7000,::1:7001');
    expect(describeRedisTarget(target)).not.toMatch(/pw/);
    expect(redisTargetOf(loadConfig(base, 'cli'))).toEqual({ kind: 'single', url: 'redis://127.0.0.1:6379' });
  });
});
