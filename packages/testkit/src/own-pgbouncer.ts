/**
 * A private PgBouncer (Debian's `pgbouncer`) in transaction pooling mode in front of the test Postgres, on a free
 * port, stopped by `destroy()`. It trusts the client as the test Postgres does (trust auth, user from the URL).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { killQuietly, onProcessExit, stopChild } from './cleanup.ts';
import { freePort } from './free-port.ts';
import { waitFor } from './wait-for.ts';

export interface OwnPgBouncer {
  port: number;
  /** `databaseUrl` with its host and port replaced by PgBouncer's. */
  urlFor(databaseUrl: string): string;
  /** Transactions PgBouncer has passed to `database` so far (its admin console's SHOW STATS). */
  transactions(database: string): Promise<number>;
  /**
   * Point PgBouncer at another server (`databaseUrl`'s host and port), as an operator or Patroni's callback does
   * after a failover: rewrite the config and RELOAD. Server connections to the old server are closed as they are
   * released (after their current transaction); clients keep their connections to PgBouncer.
   */
  retarget(databaseUrl: string): Promise<void>;
  /** Client connections to `database` and the server connections PgBouncer holds for them now (SHOW POOLS). */
  connections(database: string): Promise<{ clients: number; servers: number }>;
  /**
   * Immediate shutdown (SIGTERM: every client and server connection is cut, open transactions with them), then the
   * same configuration again on the same port; resolves once it accepts connections.
   */
  restart(): Promise<void>;
  destroy(): Promise<void>;
}

/** PgBouncer's binary: on PATH, or where Debian's package puts it (/usr/sbin is not on every user's PATH). */
const PGBOUNCER = existsSync('/usr/sbin/pgbouncer') ? '/usr/sbin/pgbouncer' : 'pgbouncer';

/** Whether this machine has PgBouncer (`apt-get install pgbouncer`; .ci/run installs it). */
export const hasPgBouncer = (): boolean => spawnSync(PGBOUNCER, ['--version'], { encoding: 'utf8' }).status === 0;

/** The config pointing at `url`'s server: its database by name (so a RELOAD can move it), any other through `*`. */
function pgbouncerIni(url: URL, own: { port: number; dir: string; user: string; poolSize: number }): string {
  const server = `host=${url.hostname} port=${url.port || 5432}`;
  const database = decodeURIComponent(url.pathname.slice(1));
  return [
    '[databases]',
    ...(database ? [`${database} = ${server} dbname=${database}`] : []),
    `* = ${server}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${own.port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(own.dir, 'userlist.txt')}`,
    'pool_mode = transaction',
    `admin_users = ${own.user}`,
    `default_pool_size = ${own.poolSize}`,
    'max_client_conn = 500',
    // node-postgres sends statement_timeout as a startup parameter; PgBouncer 1.18 cannot pass it on
    // (docs/deployment.md).
    'ignore_startup_parameters = statement_timeout,extra_float_digits',
    '',
  ].join('\n');
}

/** Resolves once something accepts connections on 127.0.0.1:`port`; throws after 10 s. */
async function untilListening(port: number): Promise<void> {
  await waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const s = connect(port, '127.0.0.1');
        s.once('connect', () => (s.destroy(), resolve(true)));
        s.once('error', () => resolve(false));
      }),
    { timeoutMs: 10_000, intervalMs: 50, message: `pgbouncer on ${port} did not start` },
  );
}

/** Rows of a command on PgBouncer's admin console (simple protocol only). */
async function adminCommand<T>(port: number, user: string, command: string): Promise<T[]> {
  const client = new pg.Client({ host: '127.0.0.1', port, user, database: 'pgbouncer' });
  await client.connect();
  try {
    return (await client.query({ text: command, queryMode: 'simple' } as pg.QueryConfig)).rows as T[];
  } finally {
    await client.end();
  }
}

export async function startOwnPgBouncer(
  databaseUrl: string,
  options: { poolSize?: number } = {},
): Promise<OwnPgBouncer> {
  const target = new URL(databaseUrl);
  const user = decodeURIComponent(target.username || 'postgres');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'mcb-pgbouncer-'));
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
  const ini = join(dir, 'pgbouncer.ini');
  const writeIni = (url: URL) =>
    writeFileSync(ini, pgbouncerIni(url, { port, dir, user, poolSize: options.poolSize ?? 4 }));
  writeIni(target);
  // PgBouncer refuses to run as root: as root (CI machines), it is told to switch to the postgres user, which must
  // then be able to read its files.
  const asRoot = process.getuid?.() === 0;
  if (asRoot)
    for (const f of [dir, join(dir, 'userlist.txt'), join(dir, 'pgbouncer.ini')])
      chmodSync(f, f === dir ? 0o755 : 0o644);
  let child: ChildProcess | undefined;
  const launch = async () => {
    child = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], { stdio: 'ignore' });
    await untilListening(port);
  };
  const unregister = onProcessExit(() => {
    killQuietly(child?.pid);
    rmSync(dir, { recursive: true, force: true });
  });
  await launch();
  const admin = <T>(command: string): Promise<T[]> => adminCommand<T>(port, user, command);
  const show = <T>(what: string): Promise<T[]> => admin<T>(`SHOW ${what}`);
  return {
    port,
    urlFor(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async retarget(databaseUrl) {
      writeIni(new URL(databaseUrl));
      await admin('RELOAD');
    },
    async transactions(database) {
      const rows = await show<{ database: string; total_xact_count: string }>('STATS');
      return Number(rows.find((r) => r.database === database)?.total_xact_count ?? 0);
    },
    async connections(database) {
      const rows = (await show<Record<string, string>>('POOLS')).filter((r) => r.database === database);
      const sum = (...cols: string[]) => rows.reduce((n, r) => n + cols.reduce((m, c) => m + Number(r[c] ?? 0), 0), 0);
      return {
        clients: sum('cl_active', 'cl_waiting'),
        servers: sum('sv_active', 'sv_idle', 'sv_used', 'sv_tested', 'sv_login'),
      };
    },
    async restart() {
      await stopChild(child, 'SIGTERM');
      await launch();
    },
    async destroy() {
      const c = child;
      child = undefined;
      await stopChild(c, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
      unregister();
    },
  };
}
