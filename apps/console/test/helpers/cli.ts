import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The console's CLI (what `pnpm cli` runs). */
const CLI = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** How a CLI run ended: its exit code and what it printed. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `pnpm cli ...args` as a child process talking to the console at `url`: its address and the operator's `token` (none
 * when undefined) come from the environment only, nothing else of this process's. `cwd` where it runs (the test's
 * folder when omitted); `timeoutMs` @defaultValue 20000.
 */
export function runCli(
  url: string,
  token: string | undefined,
  args: readonly string[],
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      {
        ...(opts.cwd ? { cwd: opts.cwd } : {}),
        env: { PATH: process.env.PATH, CONSOLE_URL: url, ...(token ? { CONSOLE_OPERATOR_TOKEN: token } : {}) },
        timeout: opts.timeoutMs ?? 20_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
