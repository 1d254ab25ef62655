/**
 * Limit: RSA PKCS#1 v1.5 private decryptions per second with the ingest key size, one key-size block at a time
 * (what decodeCallback does per block), on one core and then on every core at once (worker threads). Each call is
 * made the way ingest makes it (`blockDecryptor`: a key copy carrying its padding, which spares Node's two thrown
 * key checks per call, about 5 % of a decryption), so that the ratio compares ingest with the best this machine
 * can do, not with a slower call.
 */
import { constants, createPrivateKey, publicEncrypt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { blockDecryptor } from '@mcb/core/callback';

export interface RsaLimit {
  bits: number;
  /** Decryptions per second on one core. */
  perCore: number;
  /** Decryptions per second with one thread per core, all at once. */
  allCores: number;
  cores: number;
}

/** Decrypt for `ms` milliseconds; returns decryptions per second. Runs in whichever thread calls it. */
export function decryptLoop(privateKeyPem: string, publicKeyPem: string, ms: number): number {
  const { decrypt } = blockDecryptor(createPrivateKey(privateKeyPem));
  const block = publicEncrypt(
    { key: publicKeyPem, padding: constants.RSA_PKCS1_PADDING },
    Buffer.from('{"OrderNo":"bench"}'),
  );
  for (let i = 0; i < 20; i++) decrypt(block); // warm up
  let n = 0;
  const t0 = performance.now();
  let now = t0;
  while (now - t0 < ms) {
    for (let i = 0; i < 10; i++) decrypt(block);
    n += 10;
    now = performance.now();
  }
  return n / ((now - t0) / 1000);
}

/**
 * What one decryption costs in CPU: decryptions per CPU-second of the calling thread (`process.threadCpuUsage`), the
 * same call as decryptLoop's, for `ms` of that thread's CPU. A wall-clock rate falls when other processes share the
 * core; this one does not (much), so CPU per credit can be expressed in decryptions on a busy machine too.
 */
export function decryptsPerCpuSecond(privateKeyPem: string, publicKeyPem: string, ms: number): number {
  const { decrypt } = blockDecryptor(createPrivateKey(privateKeyPem));
  const block = publicEncrypt(
    { key: publicKeyPem, padding: constants.RSA_PKCS1_PADDING },
    Buffer.from('{"OrderNo":"bench"}'),
  );
  for (let i = 0; i < 20; i++) decrypt(block); // warm up
  const cpuMs = (since: NodeJS.CpuUsage) => {
    const u = process.threadCpuUsage(since);
    return (u.user + u.system) / 1000;
  };
  const t0 = process.threadCpuUsage();
  let n = 0;
  let used = 0;
  while (used < ms) {
    for (let i = 0; i < 10; i++) decrypt(block);
    n += 10;
    used = cpuMs(t0);
  }
  return n / (used / 1000);
}

// The same call as decryptLoop's when blockDecryptor chose the padded key copy (\`fast\`), else the documented call.
const THREAD_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const { constants, createPrivateKey, privateDecrypt, publicEncrypt } = require('node:crypto');
const key = createPrivateKey(workerData.priv);
let decrypt = (block) => privateDecrypt({ key, padding: constants.RSA_PKCS1_PADDING }, block);
if (workerData.fast) {
  Object.defineProperty(key, 'padding', { value: constants.RSA_PKCS1_PADDING });
  decrypt = (block) => privateDecrypt(key, block);
}
const block = publicEncrypt({ key: workerData.pub, padding: constants.RSA_PKCS1_PADDING }, Buffer.from('{"OrderNo":"bench"}'));
for (let i = 0; i < 20; i++) decrypt(block);
let n = 0; const t0 = performance.now(); let now = t0;
while (now - t0 < workerData.ms) { for (let i = 0; i < 10; i++) decrypt(block); n += 10; now = performance.now(); }
parentPort.postMessage(n / ((now - t0) / 1000));
`;

export async function measureRsa(opts: {
  privateKeyFile: string;
  publicKeyPem: string;
  bits: number;
  seconds: number;
}): Promise<RsaLimit> {
  const priv = readFileSync(opts.privateKeyFile, 'utf8');
  const ms = opts.seconds * 1000;
  const perCore = decryptLoop(priv, opts.publicKeyPem, ms);
  const fast = blockDecryptor(createPrivateKey(priv)).fast;
  const cores = availableParallelism();
  const rates = await Promise.all(
    Array.from(
      { length: cores },
      () =>
        new Promise<number>((resolve, reject) => {
          const w = new Worker(THREAD_SOURCE, { eval: true, workerData: { priv, pub: opts.publicKeyPem, ms, fast } });
          w.once('message', (rate: number) => resolve(rate));
          w.once('error', reject);
        }),
    ),
  );
  return { bits: opts.bits, perCore, allCores: rates.reduce((a, b) => a + b, 0), cores };
}
