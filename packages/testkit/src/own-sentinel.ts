/**
 * A private Redis Sentinel setup for tests: a primary and one or more replicas (durable, as ingest requires) and one or
 * more sentinels watching them (quorum: a majority), each a `redis-server` process on a free port, stopped by `destroy()`.
 * Never the shared Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { killQuietly, onProcessExit, stopChild } from './cleanup.ts';
import { freePort } from './free-port.ts';
import { DURABLE_REDIS_ARGS, redisServerBinary, startOwnRedis, type OwnRedis } from './own-redis.ts';
import { waitFor } from './wait-for.ts';

export interface OwnSentinelSetup {
  /** The master group name the sentinel monitors. */
  name: string;
  /** `host:port[,host:port...]` of the sentinels, as REDIS_SENTINELS takes it. */
  sentinels: string;
  primary: OwnRedis;
  /** The first replica (the one a failover promotes when there is only one). */
  replica: OwnRedis;
  /** Every replica, `replica` first. */
  replicas: OwnRedis[];
  /** The port of the node the sentinel currently reports as primary. */
  primaryPort(): Promise<number>;
  /** Ask the sentinel to fail over (the replica becomes primary); resolves once it reports the new primary. */
  failover(): Promise<number>;
  destroy(): Promise<void>;
}

/** Options of {@link startOwnSentinel}. */
export interface OwnSentinelOptions {
  /** Sentinel processes; the quorum is a majority of them. @defaultValue 1 */
  sentinels?: number;
  /** The sentinels ask for this password (`requirepass`, and `sentinel sentinel-pass` among themselves). @defaultValue none */
  password?: string;
  /** Replicas of the primary. @defaultValue 1 */
  replicas?: number;
  /**
   * Arguments added to every data node's command line (each may become primary), e.g.
   * `['--min-replicas-to-write', '1', '--min-replicas-max-lag', '10']`. @defaultValue none
   */
  redisArgs?: string[];
  /** The sentinels' `down-after-milliseconds`: how long a node is unanswered before it is down. @defaultValue 1000 */
  downAfterMs?: number;
}

export async function startOwnSentinel(name = 'mcb', options: OwnSentinelOptions = {}): Promise<OwnSentinelSetup> {
  const binary = redisServerBinary();
  const nodeArgs = [...DURABLE_REDIS_ARGS, ...(options.redisArgs ?? [])];
  const primary = await startOwnRedis(nodeArgs);
  const replicas: OwnRedis[] = [];
  for (let i = 0; i < (options.replicas ?? 1); i++) {
    replicas.push(await startOwnRedis([...nodeArgs, '--replicaof', '127.0.0.1', String(primary.port)]));
  }
  const replica = replicas[0]!;
  const count = options.sentinels ?? 1;
  const quorum = Math.floor(count / 2) + 1;
  const dir = mkdtempSync(join(tmpdir(), 'mcb-sentinel-'));
  const ports: number[] = [];
  let children: ChildProcess[] = [];
  const unregister = onProcessExit(() => {
    for (const c of children) killQuietly(c.pid);
    rmSync(dir, { recursive: true, force: true });
  });
  for (let i = 0; i < count; i++) {
    const port = await freePort();
    ports.push(port);
    const conf = join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primary.port} ${quorum}`,
        `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
        `sentinel failover-timeout ${name} 10000`,
        ...(options.password ? [`requirepass ${options.password}`, `sentinel sentinel-pass ${options.password}`] : []),
        '',
      ].join('\n'),
    );
    children.push(spawn(binary, [conf, '--sentinel'], { stdio: 'ignore' }));
  }
  const port = ports[0]!;
  const admin = new Redis({
    port,
    host: '127.0.0.1',
    password: options.password,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 100,
  });
  admin.on('error', () => {});
  const primaryPort = async () => {
    const [, p] = (await admin.call('SENTINEL', 'get-master-addr-by-name', name)) as [string, string];
    return Number(p);
  };
  await waitFor(
    async () => {
      if (admin.status !== 'ready') await admin.connect().catch(() => undefined);
      if ((await primaryPort().catch(() => 0)) !== primary.port) return false;
      // The sentinel must know the replica before a failover can promote it.
      const known = (await admin.call('SENTINEL', 'replicas', name)) as unknown[];
      // ...and every sentinel must know the others, or a failover could not reach its quorum.
      const others = (await admin.call('SENTINEL', 'sentinels', name)) as unknown[];
      return known.length >= replicas.length && others.length >= count - 1;
    },
    { timeoutMs: 20_000, intervalMs: 100, message: 'the sentinel did not see the primary and its replica' },
  );
  return {
    name,
    sentinels: ports.map((p) => `127.0.0.1:${p}`).join(','),
    primary,
    replica,
    replicas,
    primaryPort,
    async failover() {
      const before = await primaryPort();
      await admin.call('SENTINEL', 'failover', name);
      return waitFor(
        async () => {
          const now = await primaryPort();
          return now !== before ? now : false;
        },
        { timeoutMs: 30_000, intervalMs: 100, message: 'the failover did not happen' },
      );
    },
    async destroy() {
      admin.disconnect();
      const stopping = children;
      children = [];
      await Promise.all(stopping.map((c) => stopChild(c, 'SIGKILL')));
      for (const r of replicas) await r.destroy();
      await primary.destroy();
      rmSync(dir, { recursive: true, force: true });
      unregister();
    },
  };
}
