import type { ChildProcess } from 'node:child_process';
/**
 * Last-resort cleanup: servers and processes a reliability test starts are registered here and killed
 * synchronously when the test process exits, even after a failure or an uncaught error. Normal teardown
 * unregisters them first.
 */
const hooks = new Map<number, () => void>();
let nextId = 0;
let installed = false;

function runAll(): void {
  for (const hook of [...hooks.values()].reverse()) {
    try {
      hook();
    } catch {
      // best effort: the process is exiting
    }
  }
  hooks.clear();
}

/** Run `hook` (synchronous) when the process exits; returns a function that unregisters it. */
export function onProcessExit(hook: () => void): () => void {
  if (!installed) {
    installed = true;
    process.once('exit', runAll);
  }
  const id = nextId++;
  hooks.set(id, hook);
  return () => void hooks.delete(id);
}

/** SIGKILL a process (or its whole group when `group`), ignoring one that is already gone. */
export function killQuietly(pid: number | undefined, group = false): void {
  if (pid === undefined) return;
  try {
    process.kill(group ? -pid : pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Stop a child process with `signal` and resolve once it has exited (at once when it is not running). */
export async function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill(signal);
  });
}
