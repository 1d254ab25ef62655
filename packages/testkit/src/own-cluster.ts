/**
 * A private Redis Cluster for tests: `masters` redis-server processes (durable, as ingest requires) on free ports,
 * the 16,384 slots split evenly between them, joined with CLUSTER MEET, stopped by `destroy()`. Never the shared
 * Redis. Built with plain commands (ADDSLOTSRANGE, MEET) so it needs no redis-cli.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { killQuietly, onProcessExit, stopChild } from './cleanup.ts';
import { freePort } from './free-port.ts';
import { DURABLE_REDIS_ARGS, redisServerBinary } from './own-redis.ts';
import { waitFor } from './wait-for.ts';

export interface OwnCluster {
  /** `host:port,...` of every master, as REDIS_CLUSTER_NODES takes it. */
  nodes: string;
  ports: number[];
  /** The port of the master that holds `key`'s slot. */
  portOfKey(key: string): Promise<number>;
  destroy(): Promise<void>;
}

const SLOTS = 16_384;

export async function startOwnCluster(masters = 3): Promise<OwnCluster> {
  const binary = redisServerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'mcb-cluster-'));
  const children: ChildProcess[] = [];
  const admins: Redis[] = [];
  const unregister = onProcessExit(() => {
    for (const c of children) killQuietly(c.pid);
    rmSync(dir, { recursive: true, force: true });
  });
  const destroy = async () => {
    for (const a of admins) a.disconnect();
    await Promise.all(children.map((c) => stopChild(c, 'SIGKILL')));
    rmSync(dir, { recursive: true, force: true });
    unregister();
  };
  try {
    const ports: number[] = [];
    for (let i = 0; i < masters; i++) ports.push(await freePort());
    for (const port of ports) {
      children.push(
        spawn(
          binary,
          [
            '--port',
            String(port),
            '--bind',
            '127.0.0.1',
            '--dir',
            dir,
            '--save',
            '',
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            `nodes-${port}.conf`,
            '--cluster-node-timeout',
            '2000',
            '--appenddirname',
            `aof-${port}`,
            '--appendfilename',
            `appendonly-${port}.aof`,
            ...DURABLE_REDIS_ARGS,
          ],
          { stdio: 'ignore' },
        ),
      );
      const admin = new Redis({
        port,
        host: '127.0.0.1',
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 100,
      });
      admin.on('error', () => {});
      admins.push(admin);
    }
    await waitFor(
      async () => {
        for (const a of admins) if (a.status !== 'ready') await a.connect().catch(() => undefined);
        const pongs = await Promise.all(admins.map((a) => a.ping().catch(() => '')));
        return pongs.every((p) => p === 'PONG');
      },
      { timeoutMs: 15_000, intervalMs: 50, message: 'the cluster nodes did not start' },
    );
    const per = Math.ceil(SLOTS / masters);
    await Promise.all(
      admins.map((a, i) =>
        a.call('CLUSTER', 'ADDSLOTSRANGE', String(i * per), String(Math.min(SLOTS, (i + 1) * per) - 1)),
      ),
    );
    for (const port of ports.slice(1)) await admins[0]!.call('CLUSTER', 'MEET', '127.0.0.1', String(port));
    await waitFor(
      async () => {
        const infos = await Promise.all(admins.map((a) => a.call('CLUSTER', 'INFO') as Promise<string>));
        return infos.every(
          (info) => /cluster_state:ok/.test(info) && new RegExp(`cluster_known_nodes:${masters}\\b`).test(info),
        );
      },
      { timeoutMs: 30_000, intervalMs: 100, message: 'the cluster did not reach cluster_state:ok' },
    );
    return {
      nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
      ports,
      async portOfKey(key) {
        const slot = Number(await admins[0]!.call('CLUSTER', 'KEYSLOT', key));
        return ports[Math.min(masters - 1, Math.floor(slot / per))]!;
      },
      destroy,
    };
  } catch (e) {
    await destroy();
    throw e;
  }
}
