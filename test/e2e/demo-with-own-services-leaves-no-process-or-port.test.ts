import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { waitFor } from '@mcb/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import {
  hasEnv,
  leftListening,
  listeningPortsOf,
  processesMatching,
  processesWithEnv,
  type MarkedProcess,
} from '../helpers/process-scan.ts';

// Issue 42's acceptance: `pnpm demo --once` with MCB_OWN_SERVICES=1 starts its own Postgres and Redis beside the
// machine's, exits 0 after its checked summary, and leaves no process and no listening port behind; a demo killed
// with SIGKILL takes its servers and apps with it, and the next run starts from the same folder.
const ROOT = resolve(import.meta.dirname, '../..');
const MARK = 'MCB_OWN_SERVICES_TEST_RUN';
const mark = randomBytes(6).toString('hex');
// The own services' folder: readable by the `postgres` user the server runs as when the suite runs as root.
const folder = mkdtempSync(join(tmpdir(), 'mcb-own-services-'));
chmodSync(folder, 0o755);
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** `pnpm demo <args>` as a user types it, forced into own services, with nothing of the suite's services. */
function runDemo(
  args: string[],
  onOutput?: (out: string, child: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      v !== undefined &&
      !/^(CONSOLE_TOKEN|MERCHANT_PRIVATE_KEY_FILE|DATABASE_URL|REDIS_.*|QUEUE_PREFIX|.*_PORT|SANDBOX_.*|DEMO_.*|MCB_.*)$/.test(
        k,
      )
    )
      env[k] = v;
  }
  Object.assign(env, {
    MCB_OWN_SERVICES: '1',
    MCB_OWN_SERVICES_DIR: folder,
    MCB_ENV_FILE: 'none', // never the checkout's .env
    KEYS_DIR: join(folder, 'keys'),
    DEMO_LOG_DIR: join(folder, 'logs'),
    LOG_LEVEL: 'warn',
    // Apps killed with their parent stop within this bound even while their Redis goes away too.
    INGEST_SHUTDOWN_TIMEOUT: '5s',
    WORKER_SHUTDOWN_TIMEOUT: '5s',
    CONSOLE_SHUTDOWN_TIMEOUT: '5s',
    [MARK]: mark,
  });
  // Under `pnpm test`, npm_execpath is pnpm itself.
  const [cmd, pre] = process.env.npm_execpath ? [process.execPath, [process.env.npm_execpath]] : ['pnpm', []];
  const child = spawn(cmd, [...pre, '--silent', 'demo', ...args], { cwd: ROOT, env });
  let out = '';
  let err = '';
  child.stdout.on('data', (c) => {
    out += String(c);
    redisPort = ownPorts(out)?.redis ?? redisPort;
    onOutput?.(out, child);
  });
  child.stderr.on('data', (c) => (err += String(c)));
  // 'close', not 'exit': the demo's last lines may still be in the pipe when it exits.
  return new Promise((r) => child.once('close', (code, signal) => r({ code, signal, out, err })));
}

/**
 * The run's processes: those with its marker in their environment, and its redis-server by its port (Redis writes
 * its process title over the memory /proc shows as its environment).
 */
let redisPort: number | undefined;
const marked = (): MarkedProcess[] => [
  ...processesWithEnv(MARK, mark),
  ...(redisPort ? processesMatching(new RegExp(`redis-server 127\\.0\\.0\\.1:${redisPort}$`)) : []),
];
const ownPorts = (out: string) => {
  const m =
    /own services \(MCB_OWN_SERVICES=1\): Postgres \d+ \(.+\) on 127\.0\.0\.1:(\d+), Redis [\d.]+ \(AOF, fsync always, noeviction\) on 127\.0\.0\.1:(\d+); data in (\S+);/.exec(
      out,
    );
  return m ? { postgres: Number(m[1]), redis: Number(m[2]), folder: m[3] } : undefined;
};
/**
 * A process of the run, for a port still listening after it: its marker, or its redis-server's title. A listener that
 * is neither is a neighbour's (the file runs beside another: a freed port can be given to its next server).
 */
const isRuns = (p: MarkedProcess) =>
  hasEnv(p.pid, MARK, mark) || (redisPort !== undefined && p.command.endsWith(`redis-server 127.0.0.1:${redisPort}`));
/** What runs: the servers and the four apps. */
const kinds = (procs: MarkedProcess[]) => ({
  postgres: procs.some((p) => /\/postgres -D /.test(p.command)),
  redis: procs.some((p) => p.command.endsWith(`redis-server 127.0.0.1:${redisPort}`)),
  apps: ['sandbox', 'ingest', 'worker', 'console'].filter((a) =>
    procs.some((p) => p.command.includes(`apps/${a}/src/main.ts`)),
  ),
});

describe('pnpm demo with its own Postgres and Redis (MCB_OWN_SERVICES=1)', () => {
  it(
    'killed with SIGKILL while its services are up, takes its servers and apps with it (parent-death signal)',
    { timeout: 150_000 },
    async () => {
      expect(marked()).toEqual([]);
      let seen: MarkedProcess[] = [];
      let ports: number[] = [];
      const run = await runDemo(['--orders', '10', '--free-ports'], (out) => {
        if (seen.length > 0 || !out.includes('The services stay up until Ctrl-C')) return;
        seen = marked();
        ports = listeningPortsOf(seen.map((p) => p.pid));
        const demo = seen.find((p) => p.command.includes('scripts/demo.ts'));
        if (demo) process.kill(demo.pid, 'SIGKILL');
      });
      expect(kinds(seen), run.out + run.err).toEqual({
        postgres: true,
        redis: true,
        apps: ['sandbox', 'ingest', 'worker', 'console'],
      });
      const own = ownPorts(run.out);
      expect(own, run.out).toBeDefined();
      expect(ports).toEqual(expect.arrayContaining([own!.postgres, own!.redis]));
      // Nobody stopped them: the kernel's signal on our death did.
      await waitFor(() => marked().length === 0, {
        timeoutMs: 30_000,
        intervalMs: 100,
        message: 'processes outlived the killed demo',
      }).catch(() => {
        throw new Error(
          `still running after the demo died:\n${marked()
            .map((p) => `${p.pid} ${p.command}`)
            .join('\n')}`,
        );
      });
      expect(ports.flatMap((port) => leftListening(port, isRuns))).toEqual([]);
    },
  );

  it(
    '--once exits 0 after its checked summary, from the same folder, and leaves no process and no listening port behind',
    { timeout: 150_000 },
    async () => {
      const before = marked();
      expect(before).toEqual([]);
      let during: MarkedProcess[] = [];
      let ports: number[] = [];
      const { code, out, err } = await runDemo(['--once', '--orders', '40', '--free-ports'], (text) => {
        if (during.length > 0 || !text.includes('services up')) return;
        during = marked();
        ports = listeningPortsOf(during.map((p) => p.pid));
      });
      expect(code, out + err).toBe(0);
      expect(out).toContain('All checks held.');
      const own = ownPorts(out);
      expect(own, out).toBeDefined();
      expect(own!.folder).toBe(join(folder, 'demo'));
      expect(out).toContain(`database merchant_callbacks_demo on 127.0.0.1:${own!.postgres}: `);
      expect(out).toContain('stopping own Postgres and Redis');
      // Redis was durable (AOF always): ingest needed no loosening.
      expect(out).not.toContain('INGEST_ALLOW_VOLATILE_REDIS');

      // While it ran: both servers and the four apps, listening on the ports it printed (and more: the apps').
      expect(kinds(during)).toEqual({ postgres: true, redis: true, apps: ['sandbox', 'ingest', 'worker', 'console'] });
      expect(ports).toEqual(expect.arrayContaining([own!.postgres, own!.redis]));
      expect(ports.length).toBeGreaterThanOrEqual(2 + 6);

      // After: not one process of the run, not one of its ports listening; the data stays, the folder is free again.
      expect(marked()).toEqual([]);
      expect(ports.flatMap((port) => leftListening(port, isRuns))).toEqual([]);
      expect(existsSync(join(folder, 'demo', 'postgres', 'data', 'PG_VERSION'))).toBe(true);
      expect(existsSync(join(folder, 'demo', 'redis', 'appendonlydir'))).toBe(true);
      expect(existsSync(join(folder, 'demo', 'owner.pid'))).toBe(false);
      expect(existsSync(join(folder, 'demo', 'redis', 'redis.pid'))).toBe(false);
    },
  );
});
