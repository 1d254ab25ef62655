import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  listeningAddresses,
  MERCHANT_NO,
  startFakePlatform,
  useTestEnv,
  waitFor,
  type FakePlatform,
} from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The worker's ops listener (metrics, health) must not be reachable from outside the host unless configured.
const env = useTestEnv();
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
let platform: FakePlatform;
let child: ChildProcess | undefined;

beforeAll(async () => {
  platform = await startFakePlatform();
});
afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await platform?.close();
});

describe('the worker process (main.ts)', () => {
  it('serves metrics on 127.0.0.1 only by default, and exits 0 on SIGTERM', async () => {
    const metricsPort = await freePort();
    child = spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: env.databaseUrl,
        REDIS_URL: env.redisUrl,
        QUEUE_PREFIX: env.prefix,
        MERCHANT_NO,
        PLATFORM_BASE_URL: platform.url,
        PLATFORM_ALLOW_HTTP: 'true',
        WORKER_METRICS_PORT: String(metricsPort),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (c) => (stderr += String(c)));
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (c) => resolve(c)));
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${metricsPort}/healthz`).catch(() => undefined))?.status === 200,
      {
        timeoutMs: 20_000,
        message: `worker metrics not up (${stderr})`,
      },
    );
    expect(listeningAddresses(metricsPort)).toEqual(['127.0.0.1']);
    expect(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()).toContain('mcb_worker_jobs_total');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
