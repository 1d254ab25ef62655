import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALLBACKS_QUEUE, callbackJobOptions } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { freePort, MERCHANT_NO, startFakePlatform, stopChild, useTestEnv, waitFor, type FakePlatform } from '@mcb/testkit';

// The shipped alert rules on the real thing: Debian's Prometheus scrapes a running worker process (main.ts, as
// deployed) with deploy/prometheus/alerts.yml loaded; a job that fails for good must make CallbackJobExhausted fire,
// as seen through Prometheus's own API. Scrape and evaluation every second so it happens within seconds.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const available = spawnSync('prometheus', ['--version'], { encoding: 'utf8' }).status === 0;
const env = useTestEnv();
const dir = mkdtempSync(join(tmpdir(), 'mcb-prometheus-'));
let platform: FakePlatform;
let worker: ChildProcess | undefined;
let prometheus: ChildProcess | undefined;
let promUrl = '';

// Written reason: developer machines without Debian's prometheus package cannot run it; CI installs it.
describe.skipIf(!available && !process.env.CI)('Prometheus with deploy/prometheus/alerts.yml, scraping a worker', () => {
  beforeAll(async () => {
    expect(available, 'prometheus is not installed (apt-get install prometheus)').toBe(true);
    platform = await startFakePlatform();
    const metricsPort = await freePort();
    worker = spawn(process.execPath, ['apps/worker/src/main.ts'], {
      cwd: ROOT,
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
      stdio: 'ignore',
    });
    await waitFor(async () => (await fetch(`http://127.0.0.1:${metricsPort}/healthz`).catch(() => undefined))?.status === 200, {
      timeoutMs: 20_000,
      message: 'the worker did not start',
    });

    copyFileSync(join(ROOT, 'deploy/prometheus/alerts.yml'), join(dir, 'alerts.yml'));
    writeFileSync(
      join(dir, 'prometheus.yml'),
      JSON.stringify({
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        rule_files: ['alerts.yml'],
        scrape_configs: [{ job_name: 'worker', static_configs: [{ targets: [`127.0.0.1:${metricsPort}`] }] }],
      }),
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      'prometheus',
      [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
      { stdio: 'ignore' },
    );
    await waitFor(
      async () => {
        const res = await fetch(`${promUrl}/api/v1/targets`).catch(() => undefined);
        if (!res?.ok) return false;
        const body = (await res.json()) as { data: { activeTargets: { health: string }[] } };
        return body.data.activeTargets.some((t) => t.health === 'up');
      },
      { timeoutMs: 30_000, intervalMs: 250, message: 'Prometheus never scraped the worker' },
    );
  }, 60_000);

  afterAll(async () => {
    await stopChild(prometheus);
    await stopChild(worker);
    await platform?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const firing = async () => {
    const body = (await (await fetch(`${promUrl}/api/v1/alerts`)).json()) as { data: { alerts: { labels: Record<string, string>; state: string }[] } };
    return body.data.alerts.filter((a) => a.state === 'firing').map((a) => a.labels);
  };

  it('fires CallbackJobExhausted, with the job kind, once a job fails for good, and nothing before', async () => {
    // Let a few evaluations pass with the counters at 0: nothing fires.
    await waitFor(
      async () => {
        const res = (await (await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent('count(mcb_worker_jobs_total)')}`)).json()) as {
          data: { result: unknown[] };
        };
        return res.data.result.length > 0;
      },
      { timeoutMs: 20_000, intervalMs: 250, message: 'no worker series in Prometheus' },
    );
    expect((await firing()).filter((l) => l.alertname === 'CallbackJobExhausted')).toEqual([]);

    // A job whose payload is invalid fails at once, for good (JOB_PAYLOAD_INVALID), and is kept for replay.
    const redis = createRedis(env.redisUrl, 'producer');
    const queue = new Queue(CALLBACKS_QUEUE, { connection: redis, prefix: env.prefix });
    try {
      await queue.add('payin', { kind: 'payin', orderNo: '' } as never, { ...callbackJobOptions, jobId: 'exhausted-for-prometheus' });
      await waitFor(async () => (await queue.getJobState('exhausted-for-prometheus')) === 'failed', { timeoutMs: 20_000, message: 'the job never failed' });
    } finally {
      await queue.close();
      redis.disconnect();
    }

    const alert = await waitFor(async () => (await firing()).find((l) => l.alertname === 'CallbackJobExhausted'), {
      timeoutMs: 30_000,
      intervalMs: 250,
      message: 'CallbackJobExhausted never fired',
    });
    expect(alert).toMatchObject({ alertname: 'CallbackJobExhausted', kind: 'payin', severity: 'critical' });
  }, 90_000);
});
