/**
 * A Postgres server of our own in a folder we keep (own-services.ts): `initdb` once, then `postgres` itself as our
 * child in the foreground (not `pg_ctl`, which would detach it): as the unprivileged server user when we are root,
 * with SIGINT (fast shutdown) when we die, TCP on 127.0.0.1 only, trust authentication, superuser `postgres`.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { onProcessExit } from './cleanup.ts';
import { freePort } from './free-port.ts';
import type { PostgresBinaries } from './postgres-binaries.ts';
import { reachablePostgresBinaries } from './postgres-binaries-reach.ts';
import { chownToServerUser, commandAs, commandOf } from './run-as.ts';
import { waitFor } from './wait-for.ts';

const run = promisify(execFile);

/** Options of {@link startPostgresServer}. */
export interface PostgresServerOptions {
  /** Folder of the server: `data/` (the cluster) and `postgres.log` go here. */
  folder: string;
  binaries: PostgresBinaries;
  /** fsync and synchronous commit on (demo, dev); off for a test run's throwaway databases. */
  durable: boolean;
}

/** A running server of our own. */
export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  url: string;
  port: number;
  dataDir: string;
  /** The bin folder it runs from: the given one, or a copy the server user can reach (postgres-binaries-reach.ts). */
  binDir: string;
  /** The pid of a stale server (left by a run that died) that was stopped before this one started. */
  staleStopped: number | undefined;
  /** Fast shutdown (SIGINT), SIGQUIT then SIGKILL if it takes too long; resolves once the server is gone. */
  stop(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A postmaster still running from `data` (its postmaster.pid names a live `postgres`): stopped (immediate). */
async function stopStale(data: string): Promise<number | undefined> {
  const file = join(data, 'postmaster.pid');
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').split('\n', 1)[0]);
  if (!/postgres/.test(commandOf(pid) ?? '')) return undefined; // dead, or the pid now belongs to someone else
  process.kill(pid, 'SIGQUIT');
  await waitFor(() => !alive(pid), { timeoutMs: 10_000, intervalMs: 50 }).catch(() => process.kill(pid, 'SIGKILL'));
  return pid;
}

/** `initdb` unless the folder already holds a cluster of the same major version. */
async function ensureCluster(opts: PostgresServerOptions, data: string): Promise<void> {
  const versionFile = join(data, 'PG_VERSION');
  if (existsSync(versionFile)) {
    const made = Number(readFileSync(versionFile, 'utf8').trim());
    if (made === opts.binaries.major) return;
    throw new Error(
      `${data} holds a Postgres ${made} cluster and this machine's server is Postgres ${opts.binaries.major} (${opts.binaries.dir}): ` +
        'delete that folder (its databases go with it) or set PG_BIN_DIR to a Postgres ' +
        made +
        ' bin folder',
    );
  }
  rmSync(data, { recursive: true, force: true }); // a half-made cluster of a run interrupted during initdb
  const [file, argv] = commandAs(join(opts.binaries.dir, 'initdb'), [
    '-D',
    data,
    '-A',
    'trust',
    '-U',
    'postgres',
    '-E',
    'UTF8',
    '--no-locale',
    '--no-instructions',
    ...(opts.durable ? [] : ['--no-sync']),
  ]);
  try {
    await run(file, argv, { cwd: opts.folder, timeout: 120_000 });
  } catch (e) {
    rmSync(data, { recursive: true, force: true });
    const err = e as Error & { stderr?: string };
    throw new Error(`initdb failed: ${(err.stderr ?? '').trim() || err.message}`);
  }
}

/** Start (and when needed create) the server in `opts.folder`; resolves once it accepts queries. */
export async function startPostgresServer(options: PostgresServerOptions): Promise<PostgresServer> {
  // As root the server runs as the server user, which may not reach binaries inside a private checkout.
  const opts = { ...options, binaries: reachablePostgresBinaries(options.binaries) };
  mkdirSync(opts.folder, { recursive: true });
  chownToServerUser(opts.folder);
  const data = join(opts.folder, 'data');
  const staleStopped = await stopStale(data);
  await ensureCluster(opts, data);

  const port = await freePort();
  const settings = [
    `port=${port}`,
    'listen_addresses=127.0.0.1',
    'unix_socket_directories=', // TCP only: no socket path to outgrow or to collide with the machine's server
    'max_connections=200',
    ...(opts.durable ? [] : ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off']),
  ];
  const [file, argv] = commandAs(
    join(opts.binaries.dir, 'postgres'),
    ['-D', data, ...settings.flatMap((s) => ['-c', s])],
    { dieWithParent: 'INT' },
  );
  const logFile = join(opts.folder, 'postgres.log');
  const fd = openSync(logFile, 'a', 0o600);
  let child: ChildProcess;
  try {
    // Its own process group: Ctrl-C on the terminal reaches us, and we stop the server after the apps.
    child = spawn(file, argv, { cwd: opts.folder, stdio: ['ignore', fd, fd], detached: true });
  } finally {
    closeSync(fd);
  }
  const unregister = onProcessExit(() => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        child.kill('SIGINT'); // fast shutdown completes on its own after we are gone
      } catch {
        // already gone
      }
    }
  });
  const gone = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      const quit = setTimeout(() => child.kill('SIGQUIT'), 20_000);
      const kill = setTimeout(() => child.kill('SIGKILL'), 25_000);
      await gone;
      clearTimeout(quit);
      clearTimeout(kill);
    }
    unregister();
  };

  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const exited = new Promise<never>((_, reject) => {
    const tail = () =>
      existsSync(logFile) ? readFileSync(logFile, 'utf8').trim().split('\n').slice(-5).join('\n') : '';
    child.once('error', (e) => reject(new Error(`postgres could not start (${e.message})`)));
    child.once('exit', (code, signal) =>
      reject(new Error(`postgres exited (${code ?? signal}) before it answered; last lines of ${logFile}:\n${tail()}`)),
    );
  });
  exited.catch(() => {});
  try {
    await Promise.race([
      exited,
      waitFor(
        async () => {
          const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
          client.on('error', () => {});
          try {
            await client.connect();
            await client.query('select 1');
            return true;
          } finally {
            await client.end().catch(() => {});
          }
        },
        {
          timeoutMs: 60_000,
          intervalMs: 100,
          message: `postgres on ${port} did not accept connections (see ${logFile})`,
        },
      ),
    ]);
  } catch (e) {
    await stop();
    throw e;
  }
  return { url, port, dataDir: data, binDir: opts.binaries.dir, staleStopped, stop };
}
