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
  const found: MarkedProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      if (command && pattern.test(command)) found.push({ pid: Number(entry), command });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Every live process whose environment holds `name=value` (root reads every process's; others only their own). */
export function processesWithEnv(name: string, value: string): MarkedProcess[] {
  const needle = `${name}=${value}`;
  const found: MarkedProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const env = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (!env.includes(needle)) continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      if (command) found.push({ pid: Number(entry), command }); // an empty command line is a zombie: already dead
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** The TCP ports the given processes listen on (IPv4 and IPv6). */
export function listeningPortsOf(pids: readonly number[]): number[] {
  const inodes = new Set<string>();
  for (const pid of pids) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
          if (m) inodes.add(m[1]!);
        } catch {
          // closed meanwhile
        }
      }
    } catch {
      // gone meanwhile
    }
  }
  const ports = new Set<number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // local_address is column 1 (addr:port in hex), st column 3 (0A = LISTEN), inode column 9
      if (cols[3] === '0A' && inodes.has(cols[9] ?? '')) ports.add(parseInt(cols[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

/**
 * The processes holding a listening TCP socket on `port` (IPv4 or IPv6), read from /proc (Linux); `undefined` when
 * something listens there but no process that holds it can be read (another user's, as a non-root user).
 */
export function listenersOn(port: number): MarkedProcess[] | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] === '0A' && cols[1]?.split(':')[1] === hexPort && cols[9]) inodes.add(cols[9]);
    }
  }
  if (inodes.size === 0) return [];
  const found: MarkedProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const holds = readdirSync(`/proc/${entry}/fd`).some((fd) => {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${entry}/fd/${fd}`));
          return m !== null && inodes.has(m[1]!);
        } catch {
          return false; // closed meanwhile
        }
      });
      if (holds) {
        const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
        found.push({ pid: Number(entry), command });
      }
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found.length > 0 ? found : undefined;
}

/** Whether the process's environment holds `name=value` (false once it is gone or is not ours to read). */
export function hasEnv(pid: number, name: string, value: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`${name}=${value}`);
  } catch {
    return false;
  }
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
