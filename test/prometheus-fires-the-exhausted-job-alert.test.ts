import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALLBACKS_QUEUE, callbackJobOptions } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import {
  freePort,
  MERCHANT_NO,
  startFakePlatform,
  stopChild,
  useTestEnv,
  waitFor,
  type FakePlatform,
} from '@mcb/testkit';
import { callbackBody, payinRecord } from './reliability/helpers/callbacks.ts';
import { createTestKeys } from './reliability/helpers/keys.ts';

// The shipped alert rules on the real thing: Debian's Prometheus scrapes running ingest, worker and console
// processes (main.ts, as deployed) with deploy/prometheus/alerts.yml loaded; a job that fails for good must make
// CallbackJobExhausted fire, as seen through Prometheus's own API. Scrape and evaluation every second.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const available = spawnSync('prometheus', ['--version'], { encoding: 'utf8' }).status === 0;
const env = useTestEnv();
const dir = mkdtempSync(join(tmpdir(), 'mcb-prometheus-'));
const keys = createTestKeys();
let platform: FakePlatform;
const apps: ChildProcess[] = [];
let prometheus: ChildProcess | undefined;
let promUrl = '';
let ingestUrl = '';

/** Start an app's main.ts with its metrics on `metricsPort`; resolves once its metrics listener answers. */
async function startApp(
  app: 'ingest' | 'worker' | 'console',
  metricsPort: number,
  extra: Record<string, string>,
): Promise<void> {
  const child = spawn(process.execPath, [`apps/${app}/src/main.ts`], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      QUEUE_PREFIX: env.prefix,
      MERCHANT_NO,
      PLATFORM_BASE_URL: platform.url,
      PLATFORM_ALLOW_HTTP: 'true',
      LOG_LEVEL: 'warn',
      [`${app.toUpperCase()}_METRICS_PORT`]: String(metricsPort),
      ...extra,
    },
    stdio: 'ignore',
  });
  apps.push(child);
  await waitFor(
    async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`).catch(() => undefined))?.status === 200,
    {
      timeoutMs: 30_000,
      message: `the ${app} did not start`,
    },
  );
}

const query = async (promql: string) =>
  (
    (await (await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`)).json()) as {
      data: { result: { metric: Record<string, string>; value: [number, string] }[] };
    }
  ).data.result;

// Written reason: developer machines without Debian's prometheus package cannot run it; CI installs it.
describe.skipIf(!available && !process.env.CI)(
  'Prometheus with deploy/prometheus/alerts.yml, scraping ingest, worker and console',
  () => {
    beforeAll(async () => {
      expect(available, 'prometheus is not installed (apt-get install prometheus)').toBe(true);
      platform = await startFakePlatform();
      const ports = { ingest: await freePort(), worker: await freePort(), console: await freePort() };
      const ingestPort = await freePort();
      ingestUrl = `http://127.0.0.1:${ingestPort}`;
      await Promise.all([
        // The shared test Redis keeps nothing on disk: ingest is told to accept it (never in production).
        startApp('ingest', ports.ingest, {
          MERCHANT_PRIVATE_KEY_FILE: keys.privateKeyFile,
          INGEST_PORT: String(ingestPort),
          INGEST_WORKERS: '1',
          INGEST_ALLOW_VOLATILE_REDIS: 'true',
        }),
        startApp('worker', ports.worker, {}),
        startApp('console', ports.console, {
          CONSOLE_TOKEN: 'prometheus-test-token-0123456789',
          CONSOLE_PORT: String(await freePort()),
        }),
      ]);

      copyFileSync(join(ROOT, 'deploy/prometheus/alerts.yml'), join(dir, 'alerts.yml'));
      writeFileSync(
        join(dir, 'prometheus.yml'),
        JSON.stringify({
          global: { scrape_interval: '1s', evaluation_interval: '1s' },
          rule_files: ['alerts.yml'],
          scrape_configs: Object.entries(ports).map(([job, port]) => ({
            job_name: job,
            static_configs: [{ targets: [`127.0.0.1:${port}`] }],
          })),
        }),
      );
      const port = await freePort();
      promUrl = `http://127.0.0.1:${port}`;
      prometheus = spawn(
        'prometheus',
        [
          `--config.file=${join(dir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(dir, 'data')}`,
          `--web.listen-address=127.0.0.1:${port}`,
        ],
        { stdio: 'ignore' },
      );
      await waitFor(
        async () => {
          const res = await fetch(`${promUrl}/api/v1/targets`).catch(() => undefined);
          if (!res?.ok) return false;
          const body = (await res.json()) as { data: { activeTargets: { health: string }[] } };
          return body.data.activeTargets.length === 3 && body.data.activeTargets.every((t) => t.health === 'up');
        },
        { timeoutMs: 30_000, intervalMs: 250, message: 'Prometheus never scraped all three apps' },
      );
    }, 90_000);

    afterAll(async () => {
      await stopChild(prometheus);
      await Promise.all(apps.map((a) => stopChild(a)));
      await platform?.close();
      keys.remove();
      rmSync(dir, { recursive: true, force: true });
    });

    it('scrapes each app: a callback acknowledged by ingest is counted, and every app reports the queue depth', async () => {
      const body = callbackBody(payinRecord(MERCHANT_NO), keys.publicKeyPem);
      const res = await fetch(`${ingestUrl}/callbacks/payin`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(`${res.status} ${await res.text()}`).toBe('200 success');
      await waitFor(async () => (await query('sum(ingest_callbacks_total{outcome="success"})'))[0]?.value[1] === '1', {
        timeoutMs: 20_000,
        intervalMs: 250,
        message: 'Prometheus never saw the acknowledged callback',
      });
      const depthBy = (await query('count by (job) (mcb_queue_jobs)')).map((r) => r.metric.job).sort();
      expect(depthBy).toEqual(['console', 'ingest', 'worker']);
      // Without MERCHANTS_FILE every merchant's series is labelled `default`, in every app: the rules' `by (merchant)`
      // joins ingest's with the workers'.
      const merchants = (await query('count by (job, merchant) (mcb_queue_jobs or ingest_callbacks_total)')).map(
        (r) => `${r.metric.job} ${r.metric.merchant}`,
      );
      expect(merchants.sort()).toEqual(['console default', 'ingest default', 'worker default']);
    }, 60_000);

    const firing = async () => {
      const body = (await (await fetch(`${promUrl}/api/v1/alerts`)).json()) as {
        data: { alerts: { labels: Record<string, string>; state: string }[] };
      };
      return body.data.alerts.filter((a) => a.state === 'firing').map((a) => a.labels);
    };

    it('fires CallbackJobExhausted, with the job kind, once a job fails for good, and nothing before', async () => {
      // Let a few evaluations pass with the counters at 0: nothing fires.
      await waitFor(
        async () => {
          const res = (await (
            await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent('count(mcb_worker_jobs_total)')}`)
          ).json()) as {
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
        await queue.add('payin', { kind: 'payin', orderNo: '' } as never, {
          ...callbackJobOptions,
          jobId: 'exhausted-for-prometheus',
        });
        await waitFor(async () => (await queue.getJobState('exhausted-for-prometheus')) === 'failed', {
          timeoutMs: 20_000,
          message: 'the job never failed',
        });
      } finally {
        await queue.close();
        redis.disconnect();
      }

      const alert = await waitFor(async () => (await firing()).find((l) => l.alertname === 'CallbackJobExhausted'), {
        timeoutMs: 30_000,
        intervalMs: 250,
        message: 'CallbackJobExhausted never fired',
      });
      expect(alert).toMatchObject({
        alertname: 'CallbackJobExhausted',
        merchant: 'default',
        kind: 'payin',
        severity: 'critical',
      });
    }, 90_000);
  },
);
