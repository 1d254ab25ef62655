import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, redisTargetOf } from '@mcb/core/redis';
import { freePort, startOwnSentinel, startRespProxy, waitFor, type OwnSentinelSetup } from '@mcb/testkit';
import { createSentinelFence } from '../src/primary-fence.ts';

// Issue 27: through Sentinel, ingest acknowledges a batch only when a majority of the sentinels name the node it was
// written to (by run id) as the healthy primary. A stale primary (paused while a replica was promoted, then resumed,
// still believing it is primary) gets writes and even a replica's WAIT; the fence is what refuses them.
let setup: OwnSentinelSetup;
const opened: { disconnect(): void }[] = [];

beforeAll(async () => {
  setup = await startOwnSentinel('fence', { sentinels: 3, replicas: 2, downAfterMs: 1000 });
}, 60_000);
afterAll(async () => {
  for (const c of opened) c.disconnect();
  await setup?.destroy();
});

const targetOf = (sentinels = setup.sentinels) =>
  redisTargetOf({
    REDIS_URL: 'redis://unused',
    REDIS_SENTINELS: sentinels,
    REDIS_SENTINEL_NAME: setup.name,
    REDIS_CLUSTER_NODES: undefined,
    REDIS_PASSWORD: undefined,
  }) as Extract<ReturnType<typeof redisTargetOf>, { kind: 'sentinel' }>;

function plain(port: number): Redis {
  const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  r.on('error', () => {});
  opened.push(r);
  return r;
}

async function ready(r: Redis): Promise<Redis> {
  if (r.status !== 'ready') await new Promise<void>((resolve) => r.once('ready', () => resolve()));
  return r;
}

describe('the sentinel fence', () => {
  it('passes a batch written to the primary, asking the sentinels in parallel', async () => {
    const redis = createRedis(targetOf(), 'producer', { connectionName: 'fence-test' }) as Redis;
    redis.on('error', () => {});
    opened.push(redis);
    await ready(redis);
    const fence = createSentinelFence(redis, targetOf());
    try {
      const check = fence.begin();
      await redis.set('fence:k', '1');
      await expect(check()).resolves.toBeUndefined();
      // The run id is read once per connection: a second batch asks only the sentinels.
      await expect(fence.begin()()).resolves.toBeUndefined();
    } finally {
      fence.close();
    }
  });

  it('refuses a node the sentinels do not name (a replica), saying what they named', async () => {
    const replica = await ready(plain(setup.replicas[1]!.port));
    const fence = createSentinelFence(replica, targetOf());
    try {
      await expect(fence.begin()()).rejects.toThrow(
        /a sentinel does not name the node written to as the healthy primary .*a sentinel names 127\.0\.0\.1:\d+ [0-9a-f]{8} master/,
      );
    } finally {
      fence.close();
    }
  });

  it("refuses when one sentinel names another primary while two still name this one (only a failover's leader knows yet)", async () => {
    const primary = await ready(plain(await setup.primaryPort()));
    const [first, second, third] = setup.sentinels.split(',');
    // The third sentinel led a failover the other two have not heard of: it names the promoted replica.
    const leader = await startRespProxy(`redis://${third}`, (cmd) =>
      cmd[0]?.toUpperCase() === 'SENTINEL' && cmd[1]?.toUpperCase() === 'MASTER'
        ? {
            reply: [
              'name',
              setup.name,
              'ip',
              '127.0.0.1',
              'port',
              String(setup.replicas[0]!.port),
              'runid',
              'f'.repeat(40),
              'flags',
              'master',
              'config-epoch',
              '9',
            ].map((v) => Buffer.from(v)),
          }
        : { forward: true },
    );
    const fence = createSentinelFence(primary, targetOf(`${first},${second},${new URL(leader.url).host}`));
    try {
      await expect(fence.begin()()).rejects.toThrow(/a sentinel does not name the node written to .*ffffffff master/);
      // The same two sentinels alone, with the third not answering, are a majority in agreement: the batch passes.
      const nowhere = `127.0.0.1:${await freePort()}`;
      const fenceOfTwo = createSentinelFence(primary, targetOf(`${first},${second},${nowhere}`), { timeoutMs: 300 });
      try {
        await expect(fenceOfTwo.begin()()).resolves.toBeUndefined();
      } finally {
        fenceOfTwo.close();
      }
    } finally {
      fence.close();
      await leader.close();
    }
  });

  it('refuses a batch whose connection reconnected between its writes and its check', async () => {
    const primary = await ready(plain(await setup.primaryPort()));
    const fence = createSentinelFence(primary, targetOf());
    try {
      const check = fence.begin();
      primary.disconnect(true); // reconnect: a new generation, perhaps another node
      await ready(primary);
      await expect(check()).rejects.toThrow(/connection moved to another node/);
      await expect(fence.begin()()).resolves.toBeUndefined(); // the next batch, on the new connection, is checked afresh
    } finally {
      fence.close();
    }
  });

  it('refuses when too few sentinels answer (nothing listens on their ports)', async () => {
    const primary = await ready(plain(await setup.primaryPort()));
    const nowhere = `127.0.0.1:${await freePort()},127.0.0.1:${await freePort()},127.0.0.1:${await freePort()}`;
    const fence = createSentinelFence(primary, targetOf(nowhere), { timeoutMs: 300 });
    try {
      // Each is named either way, by timing: "no answer" when its command failed, "not connected" when ioredis already
      // knew the connection was down and the fence did not wait for it.
      const message = await fence
        .begin()()
        .then(
          () => null,
          (e: unknown) => (e instanceof Error ? e.message : String(e)),
        );
      expect(message).toMatch(/0 of 3 sentinel\(s\) answered; a majority \(2\) must/);
      expect(message?.match(/127\.0\.0\.1:\d+ (no answer|not connected)/g)).toHaveLength(3);
    } finally {
      fence.close();
    }
  });

  it('refuses the stale primary: paused until a replica is promoted, resumed, still writable and believing it is primary', async () => {
    const oldPort = await setup.primaryPort();
    const oldPrimary = await ready(plain(oldPort));
    const fence = createSentinelFence(oldPrimary, targetOf());
    try {
      await expect(fence.begin()()).resolves.toBeUndefined(); // its run id read while it is still the primary
      const node = [setup.primary, ...setup.replicas].find((n) => n.port === oldPort)!;
      process.kill(node.pid()!, 'SIGSTOP');
      try {
        await waitFor(async () => ((await setup.primaryPort().catch(() => oldPort)) !== oldPort ? true : false), {
          timeoutMs: 30_000,
          intervalMs: 50,
          message: 'the sentinels did not promote a replica',
        });
      } finally {
        process.kill(node.pid()!, 'SIGCONT');
      }
      const check = fence.begin();
      // Whether or not a sentinel has reached it yet, the sentinels now name another node.
      await oldPrimary.set('fence:stale', '1').catch(() => undefined);
      await expect(check()).rejects.toThrow(/name the node written to/);
    } finally {
      fence.close();
    }
  }, 60_000);
});
