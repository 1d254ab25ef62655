import { orders } from '@mcb/core/db';
import { useTestEnv } from '@mcb/testkit';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

// This file and its twin (isolation-b.test.ts) write the same order number and the same queue key. If they
// shared a database, the second insert would hit the unique constraint or this file would read two rows; if they
// shared a prefix, one would read the other's marker.
describe('test-file isolation (a)', () => {
  const env = useTestEnv();

  it('sees only its own row and its own queue keys', async () => {
    await env.db.db.insert(orders).values({
      merchantOrderNo: 'ISOLATION-1',
      kind: 'payin',
      currency: 'INR',
      amount: '1',
      requestHash: 'file-a',
    });
    const redis = new Redis(env.redisUrl);
    try {
      await redis.set(`${env.prefix}:marker`, 'file-a');
      const rows = await env.db.db.select().from(orders);
      expect(rows).toHaveLength(1);
      expect(rows[0]?.requestHash).toBe('file-a');
      expect(await redis.get(`${env.prefix}:marker`)).toBe('file-a');
      expect(env.prefix).toMatch(/^t-[0-9a-f]{10}$/);
    } finally {
      redis.disconnect();
    }
  });
});
