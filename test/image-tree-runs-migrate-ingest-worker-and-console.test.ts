import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair } from '@mcb/core/callback';
import { PayinState } from '@mcb/core/spec';
import {
  deletePrefix,
  freePort,
  MERCHANT_NO,
  startFakePlatform,
  testServices,
  uniquePrefix,
  waitFor,
  type FakePlatform,
} from '@mcb/testkit';
import { buildDockerfileTree, relativeFiles, type BuiltStage } from './helpers/dockerfile-tree.ts';
import { dockerEngineAvailable, startInImage, startInTree, type RunningApp } from './helpers/image-apps.ts';

// The image as shipped runs every app. Without a Docker engine (our machines have none), the image's file tree is
// built the way the Dockerfile says (its COPY steps from a clean clone filtered by .dockerignore, its RUN steps: pnpm
// fetch and the offline production install), and migrate, ingest, worker and console are started from that tree with
// the commands docker-compose.yml gives them, against the real Postgres and Redis. With an engine (as testcontainers
// finds one), the real image is built from the clone and each app runs in a container on the host's network. The
// worker once crashed here with ERR_MODULE_NOT_FOUND: a workspace package the image never installed.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'mcb-image-'));
const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { command: string[] }>;
};
const database = `mcb_image_${randomBytes(4).toString('hex')}`;
const prefix = uniquePrefix('image');
const apps: RunningApp[] = [];
const docker = await dockerEngineAvailable();
let imageTag: string | undefined;
let image: BuiltStage | undefined;
let platform: FakePlatform;
let admin: pg.Client;
const steps: string[] = [];

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** The script of a compose service's `["node", "<script>"]` command. */
function scriptOf(service: string): string {
  const command = compose.services[service]?.command ?? [];
  expect(command[0], service).toBe('node');
  return command[1]!;
}

beforeAll(async () => {
  const clone = join(work, 'clone');
  // A clean clone: what is committed, nothing a developer's checkout has on the side.
  execFileSync('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone]);
  // What a laptop's build context may hold that must never reach the image.
  for (const at of ['node_modules', 'apps/worker/node_modules']) {
    mkdirSync(join(clone, at, 'stale'), { recursive: true });
    writeFileSync(join(clone, at, 'stale', 'index.js'), '');
  }
  writeFileSync(join(clone, '.env'), 'INGEST_ALLOW_VOLATILE_REDIS=true\n');
  mkdirSync(join(clone, 'keys'));
  writeFileSync(join(clone, 'keys', 'merchant-private.pem'), 'not a key\n');
  if (docker) {
    imageTag = `mcb-image-test:${randomBytes(4).toString('hex')}`;
    execFileSync('docker', ['build', '--quiet', '-t', imageTag, clone], {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 600_000,
    });
  } else {
    image = buildDockerfileTree({
      context: clone,
      workspace: join(work, 'build'),
      // From this machine's pnpm store: the lockfile's packages are all there, no registry is asked.
      runEnv: { npm_config_prefer_offline: 'true' },
      onStep: (line) => steps.push(line),
    });
  }
  platform = await startFakePlatform({ currencies: [{ currency: 'INR' }] });
  admin = new pg.Client({ connectionString: withDatabase(testServices().databaseUrl, 'postgres') });
  await admin.connect();
}, 600_000);

afterAll(async () => {
  await Promise.all(apps.map((p) => p.stop()));
  if (imageTag) execFileSync('docker', ['rmi', '-f', imageTag], { stdio: 'ignore' });
  await platform?.close();
  await admin?.query(`drop database if exists "${database}" with (force)`);
  await admin?.end();
  await deletePrefix(testServices().redisUrl, prefix);
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describe('the image built as the Dockerfile says', () => {
  it.skipIf(docker)(
    '(without a Docker engine) follows every step: pnpm fetch from the lockfile, then the whole workspace installed offline for production',
    () => {
      expect(steps).toEqual([
        expect.stringMatching(/^RUN npm install -g pnpm@/),
        'RUN pnpm fetch --prod',
        'RUN pnpm install --offline --prod --frozen-lockfile',
      ]);
      expect(image!.name).toBe('runtime');
      expect(image!.env.NODE_ENV).toBe('production');
      expect(image!.user).toBe('node');
    },
  );

  it.skipIf(docker)(
    "(without a Docker engine) holds every workspace package, and nothing .dockerignore keeps out (a laptop's node_modules, .env, keys, .git)",
    () => {
      const app = image!.hostWorkdir;
      const files = relativeFiles(app);
      for (const dir of ['apps', 'packages']) {
        for (const name of execFileSync('git', ['ls-tree', '--name-only', `HEAD:${dir}`], {
          cwd: ROOT,
          encoding: 'utf8',
        })
          .trim()
          .split('\n')) {
          expect(files, `${dir}/${name}/package.json`).toContain(`${dir}/${name}/package.json`);
          // Installed: each runtime dependency resolves from the package's own folder.
          const manifest = JSON.parse(readFileSync(join(app, dir, name, 'package.json'), 'utf8')) as {
            dependencies?: Record<string, string>;
          };
          for (const dep of Object.keys(manifest.dependencies ?? {})) {
            expect(
              existsSync(join(app, dir, name, 'node_modules', dep, 'package.json')),
              `${dir}/${name} → ${dep}`,
            ).toBe(true);
          }
        }
      }
      expect(existsSync(join(app, 'node_modules', 'stale'))).toBe(false);
      expect(existsSync(join(app, 'apps', 'worker', 'node_modules', 'stale'))).toBe(false);
      expect(files.filter((f) => f === '.env' || f.startsWith('keys/') || f.startsWith('.git/'))).toEqual([]);
      expect(files).toContain('packages/core/drizzle/meta/_journal.json');
    },
  );

  it('runs migrate, then ingest, worker and console each become ready, and a callback sent to ingest is credited', async () => {
    const keys = generateKeyPair(2048);
    const keyFile = join(work, 'merchant-private.pem');
    // Readable by the image's user `node` when it runs in a container (a throwaway key).
    writeFileSync(keyFile, keys.privateKeyPem, { mode: docker ? 0o644 : 0o600 });
    const [ingestPort, ingestMetrics, workerMetrics, consolePort, consoleMetrics] = await Promise.all(
      Array.from({ length: 5 }, () => freePort()),
    );
    const token = randomBytes(18).toString('base64url');
    const env: Record<string, string> = {
      ...image?.env,
      DATABASE_URL: withDatabase(testServices().databaseUrl, database),
      REDIS_URL: testServices().redisUrl,
      QUEUE_PREFIX: prefix,
      MERCHANT_NO,
      MERCHANT_PRIVATE_KEY_FILE: keyFile,
      PLATFORM_BASE_URL: platform.url,
      PLATFORM_ALLOW_HTTP: 'true',
      // The shared test Redis keeps nothing on disk; the image's own Redis checks are ingest's tests' business.
      INGEST_ALLOW_VOLATILE_REDIS: 'true',
      INGEST_PORT: String(ingestPort),
      INGEST_METRICS_PORT: String(ingestMetrics),
      WORKER_METRICS_PORT: String(workerMetrics),
      CONSOLE_PORT: String(consolePort),
      CONSOLE_METRICS_PORT: String(consoleMetrics),
      CONSOLE_TOKEN: token,
      LOG_LEVEL: 'info',
    };
    const start = (service: string) => {
      const app = imageTag
        ? startInImage(imageTag, service, scriptOf(service), env, [keyFile])
        : startInTree(service, scriptOf(service), env, join(work, `${service}.log`), image!.hostWorkdir);
      apps.push(app);
      return app;
    };
    const migrate = start('migrate');
    expect(await migrate.exitCode(), await migrate.log()).toBe(0);
    const ready = async (service: string, url: string) => {
      const app = start(service);
      let exited: number | undefined;
      void app.exitCode().then((code) => (exited = code));
      await waitFor(async () => exited !== undefined || (await fetch(url).catch(() => undefined))?.ok === true, {
        timeoutMs: 30_000,
        message: `${service} not ready at ${url}`,
      });
      if (exited !== undefined) throw new Error(`${service} exited ${exited} before it was ready:\n${await app.log()}`);
    };
    await ready('ingest', `http://127.0.0.1:${ingestPort}/readyz`);
    await ready('worker', `http://127.0.0.1:${workerMetrics}/healthz`);
    await ready('console', `http://127.0.0.1:${consoleMetrics}/healthz`);

    // The worker does its work from this tree too: register, call back, credited.
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const merchantOrderNo = `IMG-${randomBytes(4).toString('hex')}`;
    const registered = await fetch(`http://127.0.0.1:${consolePort}/api/payins`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        merchantOrderNo,
        currency: 'INR',
        amount: '1000.10',
        reason: 'order placed in the image test',
      }),
    });
    expect(registered.status).toBe(201);
    const orderNo = `PI${randomBytes(6).toString('hex')}`;
    platform.setOrder({
      orderNo,
      merchantNo: MERCHANT_NO,
      merchantOrderNo,
      type: 'payin',
      state: PayinState.Released,
      amountJson: '1000.10',
      currency: 'INR',
    });
    const record = {
      OrderNo: orderNo,
      MerchantNo: MERCHANT_NO,
      MerchantOrderNo: merchantOrderNo,
      PayTime: '2026-01-02T03:04:05',
      OrderState: 6,
      Quantity: 12.5,
      FiatCurrency: 1000.1,
    };
    const reply = await fetch(`http://127.0.0.1:${ingestPort}/callbacks/payin`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ encryptedData: encryptRecord(record, keys.publicKeyPem) }),
    });
    expect(await reply.text()).toBe('success');
    await waitFor(
      async () => {
        const order = (await (
          await fetch(`http://127.0.0.1:${consolePort}/api/orders/${merchantOrderNo}`, { headers: auth })
        ).json()) as { status?: string };
        return order.status === 'credited';
      },
      { timeoutMs: 20_000, message: "order not credited (see the worker's log)" },
    );
  }, 120_000);
});
