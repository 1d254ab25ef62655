/**
 * An app of the image, started either from the image's file tree (a Node process) or, with a Docker engine, from the
 * built image (a container on the host's network, so that the URLs of the test's Postgres, Redis and ports hold).
 */
import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { startNodeProcess } from '../reliability/helpers/node-process.ts';

/** One started app. */
export interface RunningApp {
  /** Resolves with the exit code once the app has ended. */
  exitCode(): Promise<number>;
  /** The last of its output, for a failure message. */
  log(): Promise<string>;
  stop(): Promise<void>;
}

/** Whether a Docker engine answers, as testcontainers looks for one (its strategies: DOCKER_HOST, the socket, ...). */
export async function dockerEngineAvailable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** `node <script>` from the tree at `cwd`. */
export function startInTree(
  name: string,
  script: string,
  env: Record<string, string>,
  logFile: string,
  cwd: string,
): RunningApp {
  const proc = startNodeProcess(name, script, env, logFile, cwd);
  return {
    exitCode: () => proc.exited.then(({ code, signal }) => code ?? (signal ? 128 : -1)),
    log: async () => {
      try {
        return readFileSync(logFile, 'utf8').slice(-4000);
      } catch {
        return '(no log)';
      }
    },
    stop: () => proc.stop(),
  };
}

/** `docker run` of `image` with `node <script>`; `files` are mounted read-only at the same paths. */
export function startInImage(
  image: string,
  name: string,
  script: string,
  env: Record<string, string>,
  files: string[],
): RunningApp {
  const args = ['run', '-d', '--network', 'host', '--name', `${name}-${process.pid}-${Date.now()}`];
  for (const [k, v] of Object.entries(env)) args.push('-e', `${k}=${v}`);
  for (const f of files) args.push('-v', `${f}:${f}:ro`);
  const id = execFileSync('docker', [...args, image, 'node', script], { encoding: 'utf8' }).trim();
  const docker = (...a: string[]) => promisify(execFile)('docker', a, { encoding: 'utf8' });
  return {
    exitCode: async () => Number((await docker('wait', id)).stdout.trim()),
    log: async () => {
      const { stdout, stderr } = await docker('logs', '--tail', '60', id).catch(() => ({
        stdout: '',
        stderr: '(no log)',
      }));
      return `${stdout}${stderr}`;
    },
    stop: async () => {
      await docker('rm', '-f', id).catch(() => undefined);
    },
  };
}
