/**
 * Which processes a test started, found by a marker in their environment (every child inherits it: the apps, the
 * servers, Postgres's backends), and the TCP ports they listen on, read from /proc (Linux).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** A process carrying the marker. */
export interface MarkedProcess {
  pid: number;
  /** Its command line, arguments joined by spaces. */
  command: string;
}

/** Every live process whose command line matches `pattern` (redis-server rewrites its environment's memory with its title). */
export function processesMatching(pattern: RegExp): MarkedProcess[] {
  return livePids().flatMap((pid) => {
    const command = commandOf(pid);
    return command && pattern.test(command) ? [{ pid, command }] : [];
  });
}

/** Every live process whose environment holds `name=value` (root reads every process's; others only their own). */
export function processesWithEnv(name: string, value: string): MarkedProcess[] {
  const found: MarkedProcess[] = [];
  for (const pid of livePids()) {
    if (!hasEnv(pid, name, value)) continue;
    const command = commandOf(pid);
    if (command) found.push({ pid, command }); // an empty command line is a zombie: already dead
  }
  return found;
}

/** Whether the process's environment holds `name=value` (false once it is gone or is not ours to read). */
export function hasEnv(pid: number, name: string, value: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`${name}=${value}`);
  } catch {
    return false;
  }
}

/** The TCP ports the given processes listen on (IPv4 and IPv6). */
export function listeningPortsOf(pids: readonly number[]): number[] {
  const inodes = new Set(pids.flatMap(socketInodesOf));
  const ports = new Set(listenSockets().flatMap((s) => (inodes.has(s.inode) ? [s.port] : [])));
  return [...ports].sort((a, b) => a - b);
}

/**
 * The processes holding a listening TCP socket on `port` (IPv4 or IPv6); `undefined` when something listens there
 * but no process that holds it can be read (another user's, as a non-root user).
 */
export function listenersOn(port: number): MarkedProcess[] | undefined {
  const inodes = new Set(listenSockets().flatMap((s) => (s.port === port ? [s.inode] : [])));
  if (inodes.size === 0) return [];
  const found: MarkedProcess[] = [];
  for (const pid of livePids()) {
    if (socketInodesOf(pid).some((inode) => inodes.has(inode))) found.push({ pid, command: commandOf(pid) });
  }
  return found.length > 0 ? found : undefined;
}

/**
 * Who still listens on `port` that a run left behind: a process `isRuns` claims, or a listener no readable process
 * holds. A listener that is provably another's (a test beside this one given the freed port) is not the run's.
 */
export function leftListening(port: number, isRuns: (p: MarkedProcess) => boolean): string[] {
  const listeners = listenersOn(port);
  if (listeners === undefined) return [`port ${port}: a listener no readable process holds`];
  return listeners.filter(isRuns).map((p) => `port ${port}: ${p.pid} ${p.command}`);
}

function livePids(): number[] {
  return readdirSync('/proc').flatMap((entry) => (/^\d+$/.test(entry) ? [Number(entry)] : []));
}

/** Its command line, arguments joined by spaces ('' once it is gone or is a zombie). */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '';
  }
}

/** The inodes of the sockets the process holds (none once it is gone or is not ours to read). */
function socketInodesOf(pid: number): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return []; // gone meanwhile, or not ours to read
  }
  return fds.flatMap((fd) => {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      return m ? [m[1]!] : [];
    } catch {
      return []; // closed meanwhile
    }
  });
}

/** Every listening TCP socket of the machine, IPv4 and IPv6: its local port and its inode. */
function listenSockets(): { port: number; inode: string }[] {
  return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .slice(1)
      .flatMap((line) => {
        const cols = line.trim().split(/\s+/);
        // local_address is column 1 (addr:port in hex), st column 3 (0A = LISTEN), inode column 9
        return cols[3] === '0A' && cols[1] && cols[9]
          ? [{ port: parseInt(cols[1].split(':')[1]!, 16), inode: cols[9] }]
          : [];
      }),
  );
}
