import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeyPair } from '@mcb/core/callback';
import { testServices, uniquePrefix } from '@mcb/testkit';
import { MERCHANT_NO } from '@mcb/testkit/ingest';

// A runtime whose RSA PKCS#1 v1.5 decryption throws on bad padding (OpenSSL < 3.2, or Node's CVE-2023-46809 guard)
// makes the receiver a padding oracle. Node 24 has implicit rejection, so the old behaviour is put back in the
// ingest process with a preload that makes privateDecrypt throw as such a runtime does; ingest must refuse to start.
// The control run, without the preload, starts: so the refusal is the runtime check's doing, not something else.

const dir = mkdtempSync(join(tmpdir(), 'mcb-no-ir-'));
const keyFile = join(dir, 'merchant.pem');
writeFileSync(keyFile, generateKeyPair().privateKeyPem);
const oldRuntime = join(dir, 'old-openssl.mjs');
writeFileSync(
  oldRuntime,
  `import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
const real = crypto.privateDecrypt;
// The padding as an old OpenSSL checks it: 00 02, at least 8 non-zero bytes, then a zero separator.
const wellPadded = (raw) => raw[0] === 0 && raw[1] === 2 && raw.indexOf(0, 2) >= 10;
crypto.privateDecrypt = (key, buffer) => {
  if (key && typeof key === 'object' && key.padding === crypto.constants.RSA_PKCS1_PADDING) {
    const raw = real({ ...key, padding: crypto.constants.RSA_NO_PADDING }, buffer);
    if (!wellPadded(raw)) throw new Error('error:02000079:rsa routines::padding check failed');
  }
  return real(key, buffer);
};
syncBuiltinESMExports();
`,
);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Start ingest (optionally on the "old runtime"), wait until it says it listens or exits; then stop it. */
async function startIngestProcess(preload: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [...preload, 'apps/ingest/src/main.ts'], {
    env: {
      PATH: process.env.PATH,
      MERCHANT_NO,
      MERCHANT_PRIVATE_KEY_FILE: keyFile,
      REDIS_URL: testServices().redisUrl,
      QUEUE_PREFIX: uniquePrefix('no-ir'),
      INGEST_ALLOW_VOLATILE_REDIS: 'true',
      INGEST_HOST: '127.0.0.1',
      INGEST_PORT: '0',
      INGEST_METRICS_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  // 'close', not 'exit': the process's last lines may still be in the pipe when it exits.
  const exited = new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  const listening = new Promise<void>((resolve) => {
    const onData = (c: Buffer) => {
      output += String(c);
      if (output.includes('ingest listening')) resolve();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
  });
  const first = await Promise.race([exited.then(() => 'exited' as const), listening.then(() => 'listening' as const)]);
  if (first === 'listening') child.kill('SIGTERM');
  return { code: await exited, output };
}

describe('ingest on a runtime without RSA implicit rejection', () => {
  it('refuses to start, exits 1, and says why (RUNTIME_NO_IMPLICIT_REJECTION, CVE-2023-46809)', async () => {
    const { code, output } = await startIngestProcess(['--import', oldRuntime]);
    expect(code).toBe(1);
    expect(output).toContain('RUNTIME_NO_IMPLICIT_REJECTION');
    expect(output).toContain('CVE-2023-46809');
    expect(output).not.toContain('ingest listening');
  });

  it('control: the same start on this runtime listens', async () => {
    const { output } = await startIngestProcess([]);
    expect(output).toContain('ingest listening');
  });
});
