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
