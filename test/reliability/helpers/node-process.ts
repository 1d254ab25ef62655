/**
 * An app's `main.ts` in its own process group, with stdout/stderr appended to a log file (never printed: logs are
 * for a human reading a failed run). Killing the group also kills cluster workers of an ingest primary.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { killQuietly, onProcessExit } from '@mcb/testkit';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface NodeProcess {
  name: string;
  pid: number;
  child: ChildProcess;
  /** Resolves with the exit code or signal once the process is gone and all it wrote is in the log file. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves when a stdout/stderr line matches, rejects at the deadline or when the process exits first. */
  waitForOutput(pattern: RegExp, timeoutMs: number): Promise<void>;
  /** SIGKILL the whole group. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Start `node <script>` (a path from the repository root, or from `cwd` when given: an image's file tree) with `env`
 * added to a minimal environment.
 */
export function startNodeProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  logFile: string,
  cwd = REPO_ROOT,
): NodeProcess {
  const child = spawn(process.execPath, [script], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', NODE_ENV: 'production', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${name}: spawn failed`);
  const unregister = onProcessExit(() => killQuietly(pid, true));
  const log: WriteStream = createWriteStream(logFile, { flags: 'a' });
  // Start-up lines are in the head, which is kept; the tail is for the latest lines.
  let head = '';
  let tail = '';
  const watchers = new Set<(text: string) => void>();
  const onData = (chunk: Buffer) => {
    log.write(chunk);
    const text = chunk.toString('utf8');
    if (head.length < 65_536) head += text.slice(0, 65_536 - head.length);
    tail = (tail + text).slice(-8192);
    for (const w of watchers) w(tail);
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  child.once('exit', () => {
    unregister();
    // The group may outlive its leader (cluster workers): make sure nothing of it stays behind.
    killQuietly(pid, true);
  });
  // 'close' comes after 'exit', once stdout and stderr are drained; end's callback, once the log file holds every
  // line. A test reads the log as soon as this resolves: resolved at 'exit', its last lines (the reason a process
  // gave for exiting) could still be in the pipe or in the write stream's buffer, as a busy machine showed.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('close', (code, signal) => log.end(() => resolve({ code, signal })));
  });

  const waitForOutput = (pattern: RegExp, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined = undefined;
      const done = (err?: Error) => {
        watchers.delete(check);
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      const check = (text: string) => {
        if (pattern.test(text)) done();
      };
      timer = setTimeout(
        () => done(new Error(`${name}: no output matching ${pattern} within ${timeoutMs} ms (log: ${logFile})`)),
        timeoutMs,
      );
      watchers.add(check);
      check(head + tail);
      void exited.then(({ code, signal }) =>
        done(new Error(`${name} exited (${code ?? signal}) before ${pattern} (log: ${logFile})`)),
      );
    });

  const kill = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    killQuietly(pid, true);
    await exited;
  };
  const stop = async (graceMs = 10_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return;
    }
    const timer = setTimeout(() => killQuietly(pid, true), graceMs);
    await exited;
    clearTimeout(timer);
  };
  return { name, pid, child, exited, waitForOutput, kill, stop };
}
