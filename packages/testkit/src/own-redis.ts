/** A private redis-server (never the shared one) that a test may SIGKILL and restart from its AOF. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { waitFor } from './wait-for.ts';
import { killQuietly, onProcessExit } from './cleanup.ts';
import { freePort } from './free-port.ts';

/** Durable settings ingest accepts: every acknowledged write is fsynced before the reply, nothing is evicted. */
export const DURABLE_REDIS_ARGS = ['--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction'];

export interface OwnRedis {
  url: string;
  port: number;
  /** The data directory (AOF lives here). */
  dir: string;
  /** Current server pid, if running. */
  pid(): number | undefined;
  /** SIGKILL, as in a crash; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Start again on the same port and directory (the AOF is replayed). */
  start(): Promise<void>;
  /** Kill and remove the data directory. */
  destroy(): Promise<void>;
}

export async function startOwnRedis(args: string[] = DURABLE_REDIS_ARGS): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'mcb-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const unregister = onProcessExit(() => {
    killQuietly(child?.pid);
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async () => {
    child = spawn('/usr/bin/redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args], {
      stdio: 'ignore',
    });
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {}); // refused until the server listens
    try {
      // PING answers only once the AOF is loaded (LOADING errors before), so "up" means "has its data".
      await waitFor(
        async () => {
          if (probe.status !== 'ready') await probe.connect().catch(() => undefined);
          return (await probe.ping().catch(() => '')) === 'PONG';
        },
        { timeoutMs: 15_000, message: `redis-server on ${port} did not start` },
      );
    } finally {
      probe.disconnect();
    }
  };
  const kill = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  };
  await start();
  return {
    url,
    port,
    dir,
    pid: () => (child && child.exitCode === null && child.signalCode === null ? child.pid : undefined),
    kill,
    start,
    destroy: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
      unregister();
    },
  };
}
