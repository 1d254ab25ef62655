/**
 * A private redis-server (never the shared one): a test's, which it may SIGKILL and restart from its AOF, or the
 * own services' of `pnpm demo`/`dev`/`test` (own-services.ts), which keep their data in a folder of the checkout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { waitFor } from './wait-for.ts';
import { killQuietly, onProcessExit } from './cleanup.ts';
import { freePort } from './free-port.ts';
import { commandAs, findExecutable } from './run-as.ts';

/** Durable settings ingest accepts: every acknowledged write is fsynced before the reply, nothing is evicted. */
export const DURABLE_REDIS_ARGS = [
  '--appendonly',
  'yes',
  '--appendfsync',
  'always',
  '--maxmemory-policy',
  'noeviction',
];

/** `redis-server` on PATH (Debian's /usr/bin, Homebrew's), or undefined when the machine has none. */
export const redisServerPath = (): string | undefined => findExecutable('redis-server');

/** The `redis-server` a test starts (own Redis, Sentinel and Cluster nodes): on PATH, else a clear error. */
export function redisServerBinary(): string {
  const found = redisServerPath();
  if (!found)
    throw new Error(
      'redis-server is not on PATH: install Redis (Debian: apt-get install redis-server; macOS: brew install redis)',
    );
  return found;
}

export interface OwnRedis {
  url: string;
  port: number;
  /** The data directory (AOF lives here). */
  dir: string;
  /** Current server pid, if running. */
  pid(): number | undefined;
  /** SIGKILL, as in a crash; resolves once the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (Redis flushes its AOF and exits); SIGKILL after `graceMs`. Resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
  /**
   * Start again on the same port and directory (the AOF is replayed), with `extraArgs` added to its command line for
   * this start (a setting it must have from its first moment, e.g. `['--replica-priority', '0']`). @defaultValue none
   */
  start(extraArgs?: string[]): Promise<void>;
  /** Kill and remove the data directory (unless it was given as `options.dir`). */
  destroy(): Promise<void>;
}

/** Options of {@link startOwnRedis}. */
export interface OwnRedisOptions {
  /** Keep the data here (created when missing, never removed) instead of a temporary folder. */
  dir?: string;
  /** Write the server's pid to `<dir>/redis.pid` and its log to `<dir>/redis.log` (else the log is discarded). */
  pidAndLog?: boolean;
  /** SIGTERM the server when this process dies (Linux, through setpriv), and keep it out of our process group. */
  dieWithParent?: boolean;
}

export async function startOwnRedis(
  args: string[] = DURABLE_REDIS_ARGS,
  options: OwnRedisOptions = {},
): Promise<OwnRedis> {
  const binary = redisServerBinary();
  const port = await freePort();
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'mcb-redis-'));
  if (!ownDir) mkdirSync(dir, { recursive: true });
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const unregister = onProcessExit(() => {
    if (ownDir) {
      killQuietly(child?.pid);
      rmSync(dir, { recursive: true, force: true });
    } else if (child?.pid !== undefined) {
      try {
        process.kill(child.pid, 'SIGTERM'); // it flushes and exits on its own once we are gone
      } catch {
        // already gone
      }
    }
  });
  const extra = options.pidAndLog ? ['--pidfile', join(dir, 'redis.pid'), '--logfile', join(dir, 'redis.log')] : [];
  const argv = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...extra, ...args];

  const start = async (extraArgs: string[] = []) => {
    const args = [...argv, ...extraArgs];
    // Redis may run as root: only the parent-death tie is asked of setpriv.
    const [file, fileArgs] = options.dieWithParent
      ? commandAs(binary, args, { dieWithParent: 'TERM', keepUser: true })
      : [binary, args];
    const c = spawn(file, fileArgs, {
      stdio: 'ignore',
      detached: options.dieWithParent === true,
    });
    child = c;
    await untilAnswering(c, url, port, options.pidAndLog ? join(dir, 'redis.log') : undefined);
  };
  const end = (signal: NodeJS.Signals, graceMs: number) => endChild(child, signal, graceMs);
  const kill = () => end('SIGKILL', 0);
  try {
    await start();
  } catch (e) {
    await kill();
    unregister();
    if (ownDir) rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    url,
    port,
    dir,
    pid: () => (child && child.exitCode === null && child.signalCode === null ? child.pid : undefined),
    kill,
    stop: (graceMs = 10_000) => end('SIGTERM', graceMs),
    start,
    destroy: async () => {
      await kill();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
      unregister();
    },
  };
}

/** Resolves once the server answers PING (so its AOF is loaded); rejects, with its last log lines, if it exits. */
async function untilAnswering(c: ChildProcess, url: string, port: number, logFile: string | undefined): Promise<void> {
  const exited = new Promise<never>((_, reject) => {
    const fail = (why: string) => {
      const log =
        logFile && existsSync(logFile) ? readFileSync(logFile, 'utf8').trim().split('\n').slice(-5).join('\n') : '';
      reject(new Error(`redis-server on ${port} ${why}${log ? `; last log lines:\n${log}` : ''}`));
    };
    c.once('error', (e) => fail(`could not start (${e.message})`));
    c.once('exit', (code, signal) => fail(`exited (${code ?? signal}) before it answered`));
  });
  exited.catch(() => {}); // raced below; once ready, a later exit is the caller's business
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {}); // refused until the server listens
  try {
    // PING answers only once the AOF is loaded (LOADING errors before), so "up" means "has its data".
    await Promise.race([
      exited,
      waitFor(
        async () => {
          if (probe.status !== 'ready') await probe.connect().catch(() => undefined);
          return (await probe.ping().catch(() => '')) === 'PONG';
        },
        { timeoutMs: 15_000, message: `redis-server on ${port} did not start` },
      ),
    ]);
  } finally {
    probe.disconnect();
  }
}

/** Sends `signal`, then SIGKILL after `graceMs`; resolves once the process is gone (at once if it already is). */
async function endChild(c: ChildProcess | undefined, signal: NodeJS.Signals, graceMs: number): Promise<void> {
  if (!c || c.exitCode !== null || c.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => c.kill('SIGKILL'), graceMs);
    c.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    c.kill(signal);
  });
}
