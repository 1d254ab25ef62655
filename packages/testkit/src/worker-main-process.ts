import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killQuietly, onProcessExit } from './cleanup.ts';

/** The worker's process entry, beside the package's own entry (`@mcb/worker` is `src/index.ts`). */
const WORKER_MAIN = fileURLToPath(new URL('./main.ts', import.meta.resolve('@mcb/worker')));

/** A worker process as production runs it (`node apps/worker/src/main.ts`), its output in a log file. */
export interface WorkerMainProcess {
  pid: number;
  /** Where its output goes (removed by a clean `stop()`; KEEP_WORKER_LOGS=1 keeps it). */
  logFile: string;
  /** Its ops listener's port, from its "worker started" line. */
  metricsPort: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL: it dies holding whatever it had in flight. */
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Start a worker process with `env` (added to a minimal environment; WORKER_METRICS_PORT 0 and LOG_LEVEL info unless
 * given) and wait for its "worker started" line.
 */
export async function startWorkerMainProcess(
  env: Record<string, string>,
  options: { timeoutMs?: number } = {},
): Promise<WorkerMainProcess> {
  const logDir = mkdtempSync(join(tmpdir(), 'mcb-worker-process-'));
  const logFile = join(logDir, 'worker.log');
  const child = spawn(process.execPath, [WORKER_MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      WORKER_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('worker process: spawn failed');
  const unregister = onProcessExit(() => killQuietly(pid));
  const log = createWriteStream(logFile, { flags: 'a' });
  child.once('exit', unregister);
  // 'close' (stdout and stderr drained), then end's callback (the log file holds every line): a test reading the log
  // once this resolves sees the last lines, which at 'exit' could still be in the pipe or the stream's buffer.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => log.end(() => resolve({ code, signal }))),
  );
  const started = new Promise<number>((resolve, reject) => {
    let partial = '';
    let found = false;
    const timer = setTimeout(
      () => reject(new Error(`worker process: not started within ${options.timeoutMs ?? 60_000} ms (${logFile})`)),
      options.timeoutMs ?? 60_000,
    );
    const onData = (chunk: Buffer) => {
      log.write(chunk);
      if (found) return;
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      const line = lines.find((l) => l.includes('"worker started"'));
      if (!line) return;
      found = true;
      clearTimeout(timer);
      resolve(Number((JSON.parse(line) as { metricsPort?: number }).metricsPort));
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`worker process exited before it started (${code ?? signal}): see ${logFile}`));
    });
  });
  const metricsPort = await started;
  const signal = async (sig: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    await exited;
  };
  return {
    pid,
    logFile,
    metricsPort,
    exited,
    kill: () => signal('SIGKILL'),
    async stop(graceMs = 10_000) {
      const timer = setTimeout(() => killQuietly(pid), graceMs);
      const { code } = await signal('SIGTERM').then(() => exited);
      clearTimeout(timer);
      if (code === 0 && !process.env.KEEP_WORKER_LOGS) rmSync(logDir, { recursive: true, force: true });
    },
  };
}
