/**
 * Callbacks as the platform sends them, prepared before a measurement so that the load generator spends no CPU on
 * encryption while it measures: a merchant key pair in a temporary file, and distinct encrypted pay-in records
 * (distinct OrderNo, so each one makes a job), each already framed as a complete HTTP/1.1 request.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encryptRecord, generateKeyPair, payinRecordJson as buildPayinRecordJson } from '@mcb/core/callback';
import { PayinState } from '@mcb/core/spec';

export const BENCH_MERCHANT_NO = 'M-BENCH-1';

export interface BenchKeys {
  privateKeyFile: string;
  publicKeyPem: string;
  bits: number;
  remove: () => void;
}

export function createKeys(bits: number): BenchKeys {
  const pair = generateKeyPair(bits);
  const dir = mkdtempSync(join(tmpdir(), 'mcb-bench-keys-'));
  const privateKeyFile = join(dir, 'merchant-private.pem');
  writeFileSync(privateKeyFile, pair.privateKeyPem, { mode: 0o600 });
  return {
    privateKeyFile,
    publicKeyPem: pair.publicKeyPem,
    bits,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A pay-in record's JSON text as the platform writes it (the core builder: amounts as exact JSON numbers). */
export function payinRecordJson(orderNo: string, merchantOrderNo: string, amount: string, at = new Date()): string {
  return buildPayinRecordJson({
    orderNo,
    merchantNo: BENCH_MERCHANT_NO,
    merchantOrderNo,
    payTime: at,
    orderState: PayinState.Released,
    quantity: '12.345678',
    fiatAmount: amount,
  });
}

/** Complete HTTP/1.1 requests, one per distinct callback. */
export interface PreparedRequests {
  /** Next unused request; throws when all are used (a reused callback would be a duplicate, not new work). */
  next: () => Buffer;
  remaining: () => number;
}

/** Encrypt `count` distinct pay-in callbacks for `POST {path}` on `host:port`. */
export function prepareCallbacks(opts: {
  count: number;
  publicKeyPem: string;
  host: string;
  port: number;
  path?: string;
}): PreparedRequests {
  const tag = randomBytes(4).toString('hex').toUpperCase();
  const path = opts.path ?? '/callbacks/payin';
  const head = `POST ${path} HTTP/1.1\r\nHost: ${opts.host}:${opts.port}\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n`;
  const requests: Buffer[] = new Array(opts.count);
  for (let i = 0; i < opts.count; i++) {
    const record = payinRecordJson(`PB${tag}${i}`, `MB${tag}${i}`, '1000.10');
    const body = `{"encryptedData":"${encryptRecord(record, opts.publicKeyPem)}"}`;
    requests[i] = Buffer.from(`${head}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  }
  let at = 0;
  return {
    next() {
      const r = requests[at];
      if (!r) throw new Error(`all ${opts.count} prepared callbacks are used; raise the pool size`);
      requests[at++] = undefined as unknown as Buffer; // let the memory go
      return r;
    },
    remaining: () => opts.count - at,
  };
}
