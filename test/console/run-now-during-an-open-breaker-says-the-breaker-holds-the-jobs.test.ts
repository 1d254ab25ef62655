import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { operatorActions } from '@mcb/core/db';
import { createRedis, type Redis } from '@mcb/core/redis';
import { useTestEnv } from '@mcb/testkit';
import { desc, eq } from 'drizzle-orm';
import { bearer, OPERATORS } from '../../apps/console/test/helpers/operators.ts';
import { AUTH_LIMITS_OFF, MERCHANT_NO, startOpsStack, TOKEN, type OpsStack } from './helpers/ops-harness.ts';
import { merchantKeys } from '@mcb/core/queue';

const env = useTestEnv();
let stack: OpsStack;
let redis: Redis;

beforeAll(async () => {
  redis = createRedis(env.redisUrl, 'worker');
  const config = loadConfig(
    {
      MERCHANT_NO,
      PLATFORM_BASE_URL: 'http://127.0.0.1:9',
      PLATFORM_ALLOW_HTTP: 'true',
      CONSOLE_TOKEN: TOKEN,
      DATABASE_URL: env.databaseUrl,
      QUEUE_PREFIX: env.prefix,
      LOG_LEVEL: 'silent',
      ...AUTH_LIMITS_OFF,
    },
    'console',
  );
  stack = await startOpsStack(env, { consoleDeps: { operators: OPERATORS, redis, config } });
});
afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

const runNow = async () => {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/callbacks/run-now',
    headers: { ...bearer('operator'), 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ status: 'retrying', reason: 'platform is back?', back: '/callbacks' }).toString(),
  });
  expect(res.statusCode).toBe(303);
  return new URL(String(res.headers.location), 'http://console.test').searchParams;
};

describe('"Run now" while the fleet\'s breaker is open', () => {
  it('runs nothing and says the breaker holds the jobs (an error line, not a green "0 run"); once closed it runs', async () => {
    // 1. The fleet's breaker open, as the workers' Get order guard keeps it in Redis.
    await redis.set(merchantKeys(env.prefix).fleet.breaker, '1', 'PX', 60_000);
    const held = await runNow();
    expect(held.get('ok')).toBeNull();
    expect(held.get('error')).toMatch(/^Nothing run now: the platform breaker is open and holds these jobs/);
    const [row] = await env.db.db
      .select()
      .from(operatorActions)
      .where(eq(operatorActions.action, 'queue.promote'))
      .orderBy(desc(operatorActions.id))
      .limit(1);
    expect(row).toMatchObject({ operator: 'otto.operator@example.com', outcome: 'failed:PLATFORM_CIRCUIT_OPEN' });
    // 2. Closed: run now does what it says (nothing waits here, so 0, in the page's green line).
    await redis.del(merchantKeys(env.prefix).fleet.breaker);
    const ran = await runNow();
    expect([ran.get('ok'), ran.get('error')]).toEqual(['0 job(s) run now.', null]);
  });
});
