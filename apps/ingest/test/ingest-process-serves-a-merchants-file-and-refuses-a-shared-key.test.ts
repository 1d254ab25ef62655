import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encryptRecord, generateKeyPair } from '@mcb/core/callback';
import { DURABLE_REDIS_ARGS, freePort, startOwnRedis, uniquePrefix, waitFor, type OwnRedis } from '@mcb/testkit';

// main.ts with a MERCHANTS_FILE: it loads every merchant's ring, serves each on its route, and refuses to start
// (one message naming the entry and field, no key material) when two merchants list the same key.
const [a, b] = [generateKeyPair(), generateKeyPair()];
const dir = mkdtempSync(join(tmpdir(), 'mcb-ingest-merchants-'));
const pem = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const [aFile, bFile] = [pem('a.pem', a.privateKeyPem), pem('b.pem', b.privateKeyPem)];
const merchantsFile = (name: string, merchants: object[]) => pem(name, JSON.stringify({ merchants }));
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

function startIngest(env: Record<string, string>) {
  const child = spawn(process.execPath, ['apps/ingest/src/main.ts'], {
    env: { PATH: process.env.PATH, REDIS_URL: redis.url, QUEUE_PREFIX: uniquePrefix('mf'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const out = { text: '' };
  child.stdout.on('data', (c) => (out.text += String(c)));
  child.stderr.on('data', (c) => (out.text += String(c)));
  // 'close', not 'exit': the process's last lines may still be in the pipe when it exits.
  const exited = new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  return { child, out, exited };
}

describe('the ingest process with MERCHANTS_FILE', () => {
  it("serves each merchant on its route, labels its metrics, and refuses another merchant's callback", async () => {
    const file = merchantsFile('ok.json', [
      { ref: 'a', merchantNo: 'M-A', privateKeyFiles: [aFile], legacyRoutes: true },
      { ref: 'b', merchantNo: 'M-B', privateKeyFiles: [bFile] },
    ]);
    const [port, metricsPort] = [await freePort(), await freePort()];
    const { child, out, exited } = startIngest({
      MERCHANTS_FILE: file,
      INGEST_PORT: String(port),
      INGEST_METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'warn',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitFor(
      async () => {
        const ready = (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200;
        if (!ready && child.exitCode !== null) throw new Error(`ingest exited: ${out.text.slice(-400)}`);
        return ready;
      },
      { timeoutMs: 20_000, message: 'ingest with MERCHANTS_FILE not ready' },
    );
    const record = (merchantNo: string) => ({
      OrderNo: 'PMF-1',
      MerchantNo: merchantNo,
      MerchantOrderNo: 'mo-1',
      PayTime: '2026-01-01T00:00:00',
      OrderState: 6,
      Quantity: 1,
      FiatCurrency: 7,
    });
    const send = async (path: string, body: object, key: string) => {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ encryptedData: encryptRecord(body, key) }),
      });
      return `${res.status} ${await res.text()}`;
    };
    expect(await send('/callbacks/m/b/payin', record('M-B'), b.publicKeyPem)).toBe('200 success');
    expect(await send('/callbacks/payin', record('M-A'), a.publicKeyPem)).toBe('200 success');
    expect(await send('/callbacks/payin', record('M-B'), b.publicKeyPem)).toBe('400 fail');
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/ingest_callbacks_total\{[^}]*outcome="success"[^}]*merchant="b"[^}]*\} 1/);
    expect(metrics).toMatch(/ingest_callbacks_total\{[^}]*outcome="success"[^}]*merchant="a"[^}]*\} 1/);
    // Both merchants' queues are measured.
    expect(metrics).toMatch(/mcb_queue_jobs\{queue="callbacks-b",state="waiting"[^}]*\} 1/);
    expect(metrics).toMatch(/mcb_queue_jobs\{queue="callbacks-a",state="waiting"[^}]*\} 1/);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('refuses to start when two merchants list the same key: one message naming the entry and the field', async () => {
    const copy = pem('a-copy.pem', a.privateKeyPem);
    const file = merchantsFile('shared.json', [
      { ref: 'a', merchantNo: 'M-A', privateKeyFiles: [aFile] },
      { ref: 'b', merchantNo: 'M-B', privateKeyFiles: [bFile, copy] },
    ]);
    const { out, exited } = startIngest({
      MERCHANTS_FILE: file,
      INGEST_PORT: '0',
      INGEST_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    });
    expect(await exited).toBe(1);
    const fatal = out.text
      .split('\n')
      .filter((l) => l.includes('ingest refused to start'))
      .map((l) => JSON.parse(l) as { code?: string; err?: { message?: string } });
    expect(fatal).toHaveLength(1);
    expect(fatal[0]!.code).toBe('KEY_FILE_INVALID');
    expect(fatal[0]!.err?.message).toMatch(
      /^MERCHANTS_FILE: merchants\[1\] \("b"\)\.privateKeyFiles\[1\]: .*a-copy\.pem holds the same key .* as merchants\[0\] \("a"\)\.privateKeyFiles\[0\]/,
    );
    expect(out.text).not.toContain('PRIVATE KEY');
    expect(out.text).not.toContain(a.publicKeyBase64.slice(20, 60));
  });
});
