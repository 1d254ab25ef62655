import { constants, privateDecrypt, publicEncrypt } from 'node:crypto';
import type { RingKey } from './key-ring.ts';
import { parsePublicKey } from './keys.ts';

/** PKCS#1 v1.5 encryption padding takes 11 bytes of every k-byte block. */
export const PKCS1_OVERHEAD = 11;

/** Options of {@link encryptRecord}. */
export interface EncryptRecordOptions {
  /** Split the JSON text into at least this many blocks (tests and benchmarks of multi-block records). @defaultValue 1 */
  minBlocks?: number;
}

/**
 * The PLATFORM's side of a callback: the record's JSON text (UTF-8) encrypted with RSA PKCS#1 v1.5 in chunks of at
 * most k-11 bytes, each chunk one k-byte block, Base64 of the concatenation. Used by the sandbox, tests, benchmarks.
 * @param record an object (serialised with JSON.stringify), JSON text as is (to keep exact number text), or raw
 *   bytes (tests of wrong encodings; empty bytes make one block)
 * @param publicKeyPem the merchant's public key: PEM, or Base64 DER SPKI as uploaded to the console
 */
export function encryptRecord(record: object | string | Buffer, publicKeyPem: string, opts: EncryptRecordOptions = {}): string {
  const key = parsePublicKey(publicKeyPem);
  const k = Math.ceil((key.asymmetricKeyDetails?.modulusLength ?? 0) / 8);
  const plaintext = Buffer.isBuffer(record) ? record : Buffer.from(typeof record === 'string' ? record : JSON.stringify(record), 'utf8');
  const minBlocks = Math.max(1, Math.floor(opts.minBlocks ?? 1));
  if (plaintext.length < minBlocks && plaintext.length > 0) {
    throw new RangeError(`cannot split ${plaintext.length} bytes into ${minBlocks} non-empty blocks`);
  }
  const chunkSize = Math.max(1, Math.min(k - PKCS1_OVERHEAD, Math.ceil(plaintext.length / minBlocks)));
  const blocks: Buffer[] = [];
  for (let at = 0; at < Math.max(plaintext.length, 1); at += chunkSize) {
    blocks.push(publicEncrypt({ key, padding: constants.RSA_PKCS1_PADDING }, plaintext.subarray(at, at + chunkSize)));
  }
  return Buffer.concat(blocks).toString('base64');
}

/**
 * Decrypt a ciphertext of whole k-byte blocks with one key and concatenate the plaintexts. With implicit rejection
 * (checked at startup) a wrong key or tampered block yields pseudo-random bytes instead of an error, so this never
 * tells a caller whether the padding was right; the record parser rejects the garbage. Returns `undefined` only if
 * OpenSSL refuses outright (a runtime without implicit rejection, which ingest does not start on).
 */
export function decryptBlocks(ciphertext: Buffer, key: RingKey): Buffer | undefined {
  const k = key.blockBytes;
  const parts: Buffer[] = [];
  for (let at = 0; at < ciphertext.length; at += k) {
    try {
      parts.push(privateDecrypt({ key: key.privateKey, padding: constants.RSA_PKCS1_PADDING }, ciphertext.subarray(at, at + k)));
    } catch {
      return undefined;
    }
  }
  return Buffer.concat(parts);
}
