/**
 * The apps as child processes (`node apps/<app>/src/main.ts`): start, wait until they answer, stop in reverse
 * order. Output goes to a log file per app (demo) or to our stdout with a `[app]` prefix (dev).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { commandAs } from '@mcb/testkit/own-services';

/** The four apps, in start order. */
export const APP_NAMES = ['sandbox', 'ingest', 'worker', 'console'] as const;
export type AppName = (typeof APP_NAMES)[number];

/** Where a child's output goes. */
export type OutputMode = { kind: 'file'; dir: string } | { kind: 'prefix'; write: (line: string) => void };

/** One running app. */
export interface AppProcess {
  name: AppName;
  child: ChildProcess;
  /** The log file, when output goes to files. */
  logFile: string | undefined;
  /** Resolves with the exit code (or the signal's name) when the process ends. */
  exited: Promise<number | string>;
  /** Whether it has ended. */
  hasExited(): boolean;
}

/** Start `node apps/<name>/src/main.ts` with `env`. */
export function spawnApp(name: AppName, root: string, env: Record<string, string>, output: OutputMode): AppProcess {
  let logFile: string | undefined;
  let fd: number | undefined;
  if (output.kind === 'file') {
    mkdirSync(output.dir, { recursive: true });
    logFile = join(output.dir, `${name}.log`);
    fd = openSync(logFile, 'w', 0o600);
  }
  // SIGTERM when this script dies, even of SIGKILL (Linux, setpriv): an app never outlives dev or demo.
  const [file, args] = commandAs(process.execPath, [join('apps', name, 'src', 'main.ts')], {
    dieWithParent: 'TERM',
    keepUser: true,
  });
  const child = spawn(file, args, {
    cwd: root,
    env,
    stdio: fd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd],
  });
  if (fd !== undefined) closeSync(fd); // the child holds its own copy
  if (output.kind === 'prefix') {
    const label = `[${name}]`.padEnd(10);
    for (const stream of [child.stdout, child.stderr]) {
      if (stream) createInterface({ input: stream }).on('line', (line) => output.write(`${label}${line}`));
    }
  }
  let ended = false;
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      ended = true;
      resolve(code ?? signal ?? 'unknown');
    });
    child.once('error', (e) => {
      ended = true;
      resolve(`spawn failed: ${e.message}`);
    });
  });
  return { name, child, logFile, exited, hasExited: () => ended };
}

/** The last lines of an app's log file, for an error message (apps never log bodies or keys). */
export function tailLog(proc: AppProcess, lines = 15): string {
  if (!proc.logFile) return '';
  try {
    const text = readFileSync(proc.logFile, 'utf8').trimEnd().split('\n');
    return text.slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/**
 * Poll `url` until it answers 2xx. Fails early, with the reason, when the process exits meanwhile.
 * @throws Error naming the app, the URL and its exit code or the last answer
 */
export async function waitReady(proc: AppProcess, url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (proc.hasExited()) {
      const code = await proc.exited;
      const tail = tailLog(proc);
      throw new Error(`${proc.name} exited (${code}) before it was ready${tail ? `; last log lines:\n${tail}` : ''}`);
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (e) {
      last = (e as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `${proc.name} not ready at ${url} within ${timeoutMs / 1000} s (${last})${proc.logFile ? `; see ${proc.logFile}` : ''}`,
  );
}

/** SIGTERM each app in reverse start order, waiting for it to end (SIGKILL after `graceMs`). */
export async function stopAll(procs: readonly AppProcess[], graceMs = 15_000): Promise<void> {
  for (const proc of [...procs].reverse()) {
    if (proc.hasExited()) continue;
    const timer = setTimeout(() => proc.child.kill('SIGKILL'), graceMs);
    proc.child.kill('SIGTERM');
    await proc.exited;
    clearTimeout(timer);
  }
}

/** What {@link stopOnSignals} gives a script: the list to record spawned apps in, and its way out. */
export interface StackExit {
  /** Apps spawned so far, also during start-up (Ctrl-C then must not leave any behind). */
  readonly started: AppProcess[];
  /** Whether a shutdown has begun (an app exiting then is expected, not a failure). */
  readonly stopping: boolean;
  /**
   * Servers the script started for the apps (own Postgres and Redis): stopped after the apps, in reverse order,
   * also when a signal comes during start-up.
   */
  readonly services: { stop(): Promise<void> }[];
  /** Stop the apps (reverse order), then the services, and exit; later calls wait for the first one and keep its exit code. */
  shutdown(code: number): Promise<never>;
}

/**
 * Stop every started app, then the script's own services, then exit with `codes[signal]` (read when the signal comes, so a caller may change it), on
 * SIGINT and SIGTERM. Used by `pnpm demo` and `pnpm dev`. The handlers stay installed: Ctrl-C reaches this process
 * twice (from the terminal, and again from pnpm, which forwards it), and a second SIGINT without a handler would kill
 * the process mid-shutdown, which pnpm reports as `ELIFECYCLE Command failed`. Later signals wait for the first
 * shutdown, which stopAll bounds (SIGKILL after its grace period).
 */
export function stopOnSignals(say: (line: string) => void, codes: { SIGINT: number; SIGTERM: number }): StackExit {
  const started: AppProcess[] = [];
  const services: { stop(): Promise<void> }[] = [];
  let stopping = false;
  let stopped: Promise<never> | undefined;
  const shutdown = (code: number): Promise<never> => {
    stopping = true;
    stopped ??= (async () => {
      if (started.length > 0) {
        say('stopping console, worker, ingest, sandbox');
        await stopAll(started);
      }
      if (services.length > 0) {
        say('stopping own Postgres and Redis');
        while (services.length > 0)
          await services
            .pop()!
            .stop()
            .catch((e: Error) => say(`could not stop a service: ${e.message}`));
      }
      process.exit(code);
    })();
    return stopped;
  };
  process.on('SIGINT', () => void shutdown(codes.SIGINT));
  process.on('SIGTERM', () => void shutdown(codes.SIGTERM));
  return {
    started,
    services,
    get stopping() {
      return stopping;
    },
    shutdown,
  };
}
