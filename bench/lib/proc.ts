/**
 * Child processes of the benchmark: launch a Node entry point with an environment, wait until it answers, sample
 * its memory and CPU from /proc (including cluster workers), stop it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { sleep } from './progress.ts';

const CLK_TCK = 100; // USER_HZ on Linux

/** A port nobody listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

/** A running child with its last output lines kept for error messages. */
export interface Child {
  proc: ChildProcess;
  pid: number;
  name: string;
  /** Last lines of stderr (and stdout when not discarded), for diagnostics. */
  tail: () => string;
  exited: Promise<number | null>;
  stop: (signal?: NodeJS.Signals, timeoutMs?: number) => Promise<void>;
}

export interface LaunchOptions {
  name: string;
  /** Script path (run with `node`), or a binary when `command` is set. */
  args: string[];
  command?: string;
  env?: Record<string, string>;
  cwd?: string;
  /** Keep stdout for `tail()` (pino logs). Off by default: logs go to /dev/null, as cheaply as production's shipper. */
  keepStdout?: boolean;
  nodeArgs?: string[];
}

export function launch(opts: LaunchOptions): Child {
  const command = opts.command ?? process.execPath;
  const args = opts.command ? opts.args : [...(opts.nodeArgs ?? []), ...opts.args];
  const proc = spawn(command, args, {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', opts.keepStdout ? 'pipe' : 'ignore', 'pipe'],
  });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    if (lines.length > 40) lines.splice(0, lines.length - 40);
  };
  proc.stderr?.on('data', keep);
  proc.stdout?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return {
    proc,
    pid: proc.pid ?? -1,
    name: opts.name,
    tail: () => lines.join('\n'),
    exited,
    async stop(signal = 'SIGTERM', timeoutMs = 30_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill(signal);
      const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Poll `url` until it answers 200, the child exits, or the time is up. */
export async function waitForHttp(child: Child, url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void child.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${child.name} exited during start-up:\n${child.tail()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${child.name} did not answer ${url} within ${timeoutMs} ms:\n${child.tail()}`);
}

/** The pid and its descendants (cluster workers), from /proc. */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    const p = out[i]!;
    try {
      for (const task of readdirSync(`/proc/${p}/task`)) {
        const kids = readFileSync(`/proc/${p}/task/${task}/children`, 'utf8').trim();
        if (kids) out.push(...kids.split(/\s+/).map(Number));
      }
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Resident memory of one process: current and peak (high-water mark), bytes. */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return { rss: 0, hwm: 0 };
  }
}

/** CPU seconds (user + system) used so far by one process, or by one of its threads when `tid` is given. */
export function cpuSecondsOf(pid: number, tid?: number): number {
  try {
    const stat = readFileSync(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime, stime (fields 14 and 15)
  } catch {
    return 0;
  }
}

/** CPU seconds of a process tree (the ingest primary and its workers). */
export function treeCpuSeconds(pid: number): number {
  return processTree(pid).reduce((s, p) => s + cpuSecondsOf(p), 0);
}

/** Samples RSS of a process tree every `intervalMs`; keeps the peak of the summed RSS and each sample. */
export function sampleMemory(
  pid: number,
  intervalMs = 250,
): { stop: () => { peak: number; samples: { t: number; rss: number }[] } } {
  const started = performance.now();
  const samples: { t: number; rss: number }[] = [];
  let peak = 0;
  const take = () => {
    const pids = processTree(pid);
    const rss = pids.reduce((s, p) => s + memoryOf(p).rss, 0);
    const hwm = pids.length === 1 ? memoryOf(pid).hwm : rss;
    peak = Math.max(peak, rss, hwm);
    samples.push({ t: (performance.now() - started) / 1000, rss });
  };
  take();
  const timer = setInterval(take, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      return { peak, samples };
    },
  };
}
