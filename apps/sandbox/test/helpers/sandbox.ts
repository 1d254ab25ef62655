import { constants, privateDecrypt } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPair, type GeneratedKeyPair } from '@mcb/core/callback';
import type { FastifyInstance } from 'fastify';
import { buildApp, type SandboxOptions } from '../../src/app.ts';

/** One key pair per test process: RSA generation is slow and the tests do not need distinct keys. */
let keys: GeneratedKeyPair | undefined;
export function testKeys(): GeneratedKeyPair {
  keys ??= generateKeyPair();
  return keys;
}

export const MERCHANT_NO = 'M10001';

/** Decrypt a callback body the way the spec describes: Base64, then RSA PKCS#1 v1.5 block by block. */
export function decryptBody(
  body: string,
  privateKeyPem = testKeys().privateKeyPem,
): { blocks: number; record: string } {
  const { encryptedData } = JSON.parse(body) as { encryptedData: string };
  const ciphertext = Buffer.from(encryptedData, 'base64');
  const k = 256;
  const parts: Buffer[] = [];
  for (let at = 0; at < ciphertext.length; at += k) {
    parts.push(
      privateDecrypt({ key: privateKeyPem, padding: constants.RSA_PKCS1_PADDING }, ciphertext.subarray(at, at + k)),
    );
  }
  return { blocks: parts.length, record: Buffer.concat(parts).toString('utf8') };
}

/** A reply the test receiver gives; `hang` never answers (until the receiver closes). */
export type ScriptedReply = { status: number; body: string; contentType?: string } | 'hang';

/** What the receiver got. */
export interface Received {
  at: number;
  method: string;
  contentType: string | undefined;
  body: string;
  /** The decrypted record, parsed (numbers as JS numbers; use `record` for exact text). */
  parsed: Record<string, unknown>;
  record: string;
  blocks: number;
}

/** A local HTTP callback receiver whose replies a test scripts; n is the 0-based index of the request. */
export async function startReceiver(
  reply: (n: number, received: Received) => ScriptedReply = () => ({ status: 200, body: 'success' }),
) {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let entry: Received;
      try {
        const { blocks, record } = decryptBody(body);
        entry = {
          at: Date.now(),
          method: req.method ?? '',
          contentType: req.headers['content-type'],
          body,
          record,
          blocks,
          parsed: JSON.parse(record),
        };
      } catch {
        entry = {
          at: Date.now(),
          method: req.method ?? '',
          contentType: req.headers['content-type'],
          body,
          record: '',
          blocks: 0,
          parsed: {},
        };
      }
      const n = received.length;
      received.push(entry);
      const r = reply(n, entry);
      if (r === 'hang') return;
      res.writeHead(r.status, { 'content-type': r.contentType ?? 'text/plain' });
      res.end(r.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/callbacks`,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** A sandbox built in-process with the test key, quiet, listening on a free local port. */
export async function startSandbox(opts: Partial<SandboxOptions> = {}): Promise<{ app: FastifyInstance; url: string }> {
  const app = await buildApp({
    merchantNo: MERCHANT_NO,
    merchantPublicKeyPem: testKeys().publicKeyPem,
    timeScale: 6000,
    firstAttemptDelayMs: 0,
    replyTimeoutMs: 2000,
    ...opts,
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url };
}

/** POST JSON to a running sandbox's platform API and parse the reply. */
export async function postJson(
  base: string,
  path: string,
  body: unknown,
): Promise<{ status: number; json: unknown; text: string }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}
