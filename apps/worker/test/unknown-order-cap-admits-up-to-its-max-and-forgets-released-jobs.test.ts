import { createRedis, type Redis } from '@mcb/core/redis';
import { deletePrefix, testServices, uniquePrefix } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUnknownOrderCap } from '../src/unknown-order-cap.ts';

// The cap alone, on the shared Redis under a prefix of its own: the set counts each waiting job once, the one that
// passes the cap is not kept, a released job frees its place, and an old entry (its job long gone) no longer counts.
const redisUrl = testServices().redisUrl;
const prefix = uniquePrefix('cap');
let connection: Redis;

beforeAll(() => {
  connection = createRedis(redisUrl, 'worker');
});
afterAll(async () => {
  await connection.quit();
  await deletePrefix(redisUrl, prefix);
});

describe('the unknown-order cap', () => {
  it('admits up to its max, refuses beyond it without keeping the refused job, and forgets released jobs', async () => {
    const key = `${prefix}:callbacks:unknown-order-waiting`;
    const cap = createUnknownOrderCap({ connection, key, max: 2, graceMs: 60_000 });
    expect(await cap.overCap('a')).toBe(false);
    expect(await cap.overCap('a')).toBe(false); // a retry of the same job counts once
    expect(await cap.overCap('b')).toBe(false);
    expect(await cap.overCap('c')).toBe(true);
    expect(await connection.zrange(key, 0, -1)).toEqual(['a', 'b']);
    await cap.release('a');
    expect(await cap.overCap('c')).toBe(false);
    expect((await connection.zrange(key, 0, -1)).sort()).toEqual(['b', 'c']);
  });

  it('drops entries older than the grace period and an hour', async () => {
    const key = `${prefix}:callbacks:old`;
    const cap = createUnknownOrderCap({ connection, key, max: 1, graceMs: 1000 });
    await connection.zadd(key, Date.now() - 1000 - 3_600_001, 'gone');
    expect(await cap.overCap('new')).toBe(false);
    expect(await connection.zrange(key, 0, -1)).toEqual(['new']);
  });

  it('with max 0 is off: nothing is counted in Redis', async () => {
    const key = `${prefix}:callbacks:off`;
    const cap = createUnknownOrderCap({ connection, key, max: 0, graceMs: 1000 });
    expect(await cap.overCap('x')).toBe(false);
    await cap.release('x');
    expect(await connection.exists(key)).toBe(0);
  });
});
