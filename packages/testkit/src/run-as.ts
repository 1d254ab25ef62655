/**
 * Running a server process the way a private one must run: as an unprivileged user when this process is root
 * (Postgres refuses root), and tied to this process's life (it gets a signal when we die, even of SIGKILL). Both
 * through util-linux `setpriv`, which sets the parent-death signal after changing the user and then execs the
 * server, so the child's pid is the server's own. Without `setpriv` (macOS), root falls back to `runuser` and the
 * parent-death tie is not available (callers keep a pid file and clean up a stale server at their next start).
 */
import { spawnSync } from 'node:child_process';
import { accessSync, chownSync, constants, existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Whether this process runs as root. */
export const isRoot = (): boolean => process.getuid?.() === 0;

/** The executable `name` on PATH (plus the sbin folders, where Debian puts some servers), or undefined. */
export function findExecutable(name: string, path = process.env.PATH ?? ''): string | undefined {
  for (const dir of [...path.split(delimiter), '/usr/sbin', '/sbin', '/usr/local/sbin']) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** A user's uid and gid, or undefined when it does not exist. */
function idsOf(user: string): { uid: number; gid: number } | undefined {
  const uid = spawnSync('id', ['-u', user], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', user], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/**
 * The user a server runs as when this process is root: `postgres` (Debian's and Homebrew's packages create it),
 * else `nobody`. Undefined when this process is not root (servers then run as ourselves).
 */
export function serverUser(): string | undefined {
  if (!isRoot()) return undefined;
  return idsOf('postgres') ? 'postgres' : 'nobody';
}

/** Make `path` belong to the {@link serverUser} (a no-op when this process is not root). */
export function chownToServerUser(path: string): void {
  const user = serverUser();
  if (!user) return;
  const ids = idsOf(user);
  if (ids) chownSync(path, ids.uid, ids.gid);
}

/** Options of {@link commandAs}. */
export interface CommandAsOptions {
  /**
   * The signal the server gets when this process dies (Linux `PR_SET_PDEATHSIG`, through `setpriv`); ignored
   * where `setpriv` is missing.
   */
  dieWithParent?: 'TERM' | 'INT' | 'QUIT' | 'KILL';
  /** Run as ourselves even as root (a server that does not refuse root, such as Redis). @defaultValue false */
  keepUser?: boolean;
}

const SETPRIV = findExecutable('setpriv');
const RUNUSER = findExecutable('runuser');

/**
 * The command line that runs `cmd` as the {@link serverUser} when this process is root, and with a parent-death
 * signal when asked and `setpriv` exists. `setpriv` execs `cmd`: the spawned pid is the server's.
 * @throws Error when this process is root and neither `setpriv` nor `runuser` exists
 */
export function commandAs(cmd: string, args: string[], options: CommandAsOptions = {}): [string, string[]] {
  const user = options.keepUser ? undefined : serverUser();
  if (SETPRIV) {
    const flags = [
      ...(user ? [`--reuid=${user}`, `--regid=${user}`, '--init-groups'] : []),
      ...(options.dieWithParent ? [`--pdeathsig=${options.dieWithParent}`] : []),
    ];
    return flags.length > 0 ? [SETPRIV, [...flags, '--', cmd, ...args]] : [cmd, args];
  }
  if (!user) return [cmd, args];
  if (RUNUSER) return [RUNUSER, ['-u', user, '--', cmd, ...args]];
  throw new Error(
    `running as root: ${cmd} must run as an unprivileged user, and neither setpriv nor runuser is installed`,
  );
}

/** Whether `commandAs` can tie a server to this process's life on this machine. */
export const canDieWithParent = (): boolean => SETPRIV !== undefined;

/**
 * Whether the {@link serverUser} can create files in `dir` (a folder under /root is out of its reach). Always true
 * when this process is not root.
 */
export function serverUserCanWrite(dir: string): boolean {
  const user = serverUser();
  if (!user) return true;
  const [file, argv] = commandAs('test', ['-w', dir, '-a', '-x', dir]);
  return spawnSync(file, argv, { stdio: 'ignore' }).status === 0;
}

/**
 * The command name of a running process, or undefined when no process has that pid (Linux /proc; elsewhere `ps`).
 * Used to tell a stale server of ours from an unrelated process that reused its pid.
 */
export function commandOf(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (existsSync('/proc/self/cmdline')) {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() || undefined;
    } catch {
      return undefined;
    }
  }
  const ps = spawnSync('ps', ['-p', String(pid), '-o', 'command='], { encoding: 'utf8' });
  return ps.status === 0 ? ps.stdout.trim() || undefined : undefined;
}
