/**
 * A private Postgres cluster (initdb + pg_ctl in a temporary folder, on a free port) that a test may restart.
 * initdb refuses to run as root, so as root every command runs as the `postgres` user (the testkit's `commandAs`:
 * setpriv, else runuser), with the folder owned by it. Never the shared server.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chownToServerUser, commandAs, findPostgresBinaries, freePort, onProcessExit, serverUser } from '@mcb/testkit';

const run = promisify(execFile);
/**
 * The machine's Postgres binaries (PG_BIN_DIR, PATH, Debian's newest /usr/lib/postgresql/<version>/bin), never the
 * npm distribution: pg_basebackup is needed too.
 */
const found = findPostgresBinaries();
export const PG_BIN = found && found.source !== 'npm' ? found.dir : '/usr/lib/postgresql/15/bin';
const BIN = PG_BIN;

/** Options of {@link startOwnPostgres}. */
export interface OwnPostgresOptions {
  /** fsync on the server; off is faster and fine unless Postgres durability is the point. @defaultValue false */
  fsync?: boolean;
  /** max_connections. @defaultValue 200 */
  maxConnections?: number;
}

export interface OwnPostgres {
  port: number;
  /** URL of database `name` on this server. */
  url(name: string): string;
  /** `pg_ctl restart -m fast`: every connection is cut, the server is back when this resolves. */
  restart(): Promise<void>;
  /** Stop (immediate) and remove the folder. */
  destroy(): Promise<void>;
}

/**
 * The command line that runs `cmd` as the `postgres` user when this process is root (Postgres refuses root): the
 * testkit's `commandAs`, shared with the own services of `pnpm demo`/`pnpm test`.
 */
export function asPostgres(cmd: string, args: string[]): [string, string[]] {
  return commandAs(cmd, args);
}

/** Run one of Postgres's binaries (`initdb`, `pg_ctl`, ...) by name, as {@link asPostgres} says. */
export async function pgExec(cmd: string, args: string[]): Promise<void> {
  const [file, argv] = asPostgres(join(BIN, cmd), args);
  await run(file, argv, { timeout: 60_000 });
}

/** A temporary folder the server may write to: owned by the server user when this process is root. */
export function makePgDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chownToServerUser(dir);
  return dir;
}

/** The user the servers' superuser is named after: the server user as root, else the current user (initdb's default). */
export const pgUser = (): string => serverUser() ?? userInfo().username;

export async function startOwnPostgres(opts: OwnPostgresOptions = {}): Promise<OwnPostgres> {
  const port = await freePort();
  const dir = makePgDir('mcb-rel-pg-');
  const data = join(dir, 'data');
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    '-c listen_addresses=127.0.0.1',
    `-c fsync=${opts.fsync ? 'on' : 'off'}`,
    `-c synchronous_commit=${opts.fsync ? 'on' : 'off'}`,
    '-c full_page_writes=off',
    `-c max_connections=${opts.maxConnections ?? 200}`,
  ].join(' ');
  const ctl = (...args: string[]) =>
    pgExec('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', ...args]);
  const unregister = onProcessExit(() => {
    const [file, argv] = asPostgres(join(BIN, 'pg_ctl'), ['-D', data, 'stop', '-m', 'immediate', '-w', '-t', '10']);
    spawnSync(file, argv, { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  });
  try {
    const user = pgUser();
    await pgExec('initdb', ['-D', data, '-A', 'trust', '-U', user, '-E', 'UTF8', '--no-sync', '--no-instructions']);
    await ctl('-o', options, 'start');
  } catch (e) {
    unregister();
    const [file, argv] = asPostgres(join(BIN, 'pg_ctl'), ['-D', data, 'stop', '-m', 'immediate']);
    spawnSync(file, argv, { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const user = pgUser();
  return {
    port,
    url: (name) => `postgres://${user}@127.0.0.1:${port}/${name}`,
    restart: () => ctl('-o', options, '-m', 'fast', 'restart'),
    destroy: async () => {
      await ctl('-m', 'immediate', 'stop').catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
      unregister();
    },
  };
}
