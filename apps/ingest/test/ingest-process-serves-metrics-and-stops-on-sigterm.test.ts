import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair } from '@mcb/core/callback';
import { listeningAddresses, uniquePrefix, waitFor } from '@mcb/testkit';
import { DURABLE_REDIS_ARGS, freePort, MERCHANT_NO, startOwnRedis, type OwnRedis } from '@mcb/testkit/ingest';

const keys = generateKeyPair();
const dir = mkdtempSync(join(tmpdir(), 'mcb-ingest-proc-'));
const keyFile = join(dir, 'merchant.pem');
writeFileSync(keyFile, keys.privateKeyPem);
let redis: OwnRedis;
const children: ChildProcess[] = [];

beforeAll(async () => {
  redis = await startOwnRedis(DURABLE_REDIS_ARGS);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await redis?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe('the ingest process (main.ts)', () => {
  for (const workers of ['1', '2']) {
    it(`with INGEST_WORKERS=${workers}: serves callbacks, metrics on the separate listener only, exits 0 on SIGTERM`, async () => {
      const [port, metricsPort] = [await freePort(), await freePort()];
      const child = spawn(process.execPath, ['apps/ingest/src/main.ts'], {
        env: {
          PATH: process.env.PATH,
          MERCHANT_NO,
          MERCHANT_PRIVATE_KEY_FILE: keyFile,
          REDIS_URL: redis.url,
          QUEUE_PREFIX: uniquePrefix('proc'),
          // Public on every interface, as in production: the metrics listener must not follow it.
          INGEST_HOST: '0.0.0.0',
          INGEST_PORT: String(port),
          INGEST_METRICS_PORT: String(metricsPort),
          INGEST_WORKERS: workers,
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      children.push(child);
      let stderr = '';
      child.stderr?.on('data', (c) => (stderr += String(c)));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));

      // 1. wait for readiness on the public port
      const base = `http://127.0.0.1:${port}`;
      await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, {
        timeoutMs: 20_000,
        message: `ingest not ready (${stderr})`,
      });
      // 2. one callback
      const record = {
        OrderNo: `P${workers}`,
        MerchantNo: MERCHANT_NO,
        MerchantOrderNo: 'm',
        PayTime: '2024-01-01T00:00:00',
        OrderState: 6,
        Quantity: 1,
        FiatCurrency: 7,
      };
      const res = await fetch(`${base}/callbacks/payin`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ encryptedData: encryptRecord(record, keys.publicKeyPem) }),
      });
      expect([res.status, await res.text()]).toEqual([200, 'success']);
      // 3. metrics: on the metrics port, not on the public one
      expect((await fetch(`${base}/metrics`)).status).toBe(404);
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(metrics).toMatch(
        /ingest_callbacks_total\{route="\/callbacks\/payin",outcome="success",code="",merchant="default",app="ingest"\} 1/,
      );
      // 3b. the public port is on every interface; the metrics port on loopback only (INGEST_METRICS_HOST default)
      expect(listeningAddresses(port)).toContain('0.0.0.0');
      expect(listeningAddresses(metricsPort)).toEqual(['127.0.0.1']);
      // 4. SIGTERM: a clean exit
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    });
  }
});
