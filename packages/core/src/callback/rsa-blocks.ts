import {
  constants,
  createPrivateKey,
  createPublicKey,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { malformedPkcs1Blocks } from './implicit-rejection.ts';
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
export function encryptRecord(
  record: object | string | Buffer,
  publicKeyPem: string,
  opts: EncryptRecordOptions = {},
): string {
  const key = parsePublicKey(publicKeyPem);
  const k = Math.ceil((key.asymmetricKeyDetails?.modulusLength ?? 0) / 8);
  const plaintext = Buffer.isBuffer(record)
    ? record
    : Buffer.from(typeof record === 'string' ? record : JSON.stringify(record), 'utf8');
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

/** Decrypts one k-byte block with RSA PKCS#1 v1.5 padding. */
export type BlockDecrypt = (block: Buffer) => Buffer;

/** `crypto.privateDecrypt`'s shape (injectable for tests of the fallback). */
type PrivateDecrypt = (key: KeyObject | { key: KeyObject; padding: number }, block: Buffer) => Buffer;

/**
 * The PKCS#1 v1.5 decryption of one key, as cheap per call as Node allows.
 *
 * The documented call, `privateDecrypt({ key, padding }, block)`, costs Node 24 two thrown and caught errors per
 * call before it decrypts: it first asks whether the options object is a KeyObject and then a CryptoKey, and both
 * checks answer "no" by throwing (with a stack trace). That was 4.5 % of ingest's CPU at peak, 7 % of the RSA work.
 * Node also reads `padding` from the first argument when it IS a KeyObject, so a private copy of the key carrying
 * its own `padding` decrypts with no throw. That reading is not documented, so it is used only after a check here,
 * on this runtime and this key: the copy must decrypt a well-formed block to its plaintext and two malformed blocks
 * to exactly the bytes the documented call gives (the implicit rejection's pseudo-random output, which also proves
 * the same padding mode). Any difference, or any error, and the documented call is used instead.
 * @param decrypt injectable for tests of the fallback
 */
export function blockDecryptor(
  privateKey: KeyObject,
  decrypt: PrivateDecrypt = privateDecrypt as PrivateDecrypt,
): { decrypt: BlockDecrypt; fast: boolean } {
  const options = { key: privateKey, padding: constants.RSA_PKCS1_PADDING };
  const documented: BlockDecrypt = (block) => decrypt(options, block);
  try {
    // A copy, so that the extra property never changes what other code gets from the ring's key.
    const der = privateKey.export({ type: 'pkcs8', format: 'der' });
    const copy = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
    der.fill(0); // the key's bytes stay in the two KeyObjects only, not in a buffer waiting for GC
    Object.defineProperty(copy, 'padding', { value: constants.RSA_PKCS1_PADDING, enumerable: false });
    const fast: BlockDecrypt = (block) => decrypt(copy, block);
    const publicKey = createPublicKey(privateKey);
    const plaintext = randomBytes(32);
    if (!fast(publicEncrypt({ key: publicKey, padding: constants.RSA_PKCS1_PADDING }, plaintext)).equals(plaintext))
      return { decrypt: documented, fast: false };
    for (const block of malformedPkcs1Blocks(publicKey)) {
      if (!fast(block).equals(documented(block))) return { decrypt: documented, fast: false };
    }
    return { decrypt: fast, fast: true };
  } catch {
    return { decrypt: documented, fast: false };
  }
}

const decryptors = new WeakMap<KeyObject, { decrypt: BlockDecrypt; fast: boolean }>();

function decryptorOf(privateKey: KeyObject): { decrypt: BlockDecrypt; fast: boolean } {
  let d = decryptors.get(privateKey);
  if (!d) decryptors.set(privateKey, (d = blockDecryptor(privateKey)));
  return d;
}

/**
 * Run each key's {@link blockDecryptor} check now (at start-up) rather than on the first callback it decrypts, and
 * say which call each key decrypts with: `'fast'` (the key copy carrying its padding) or `'documented'` (this
 * runtime did not decrypt the same through the copy; about 5 % more CPU per decryption).
 */
export function prepareDecryption(keys: readonly RingKey[]): Array<'fast' | 'documented'> {
  return keys.map((k) => (decryptorOf(k.privateKey).fast ? 'fast' : 'documented'));
}

/**
 * Decrypt a ciphertext of whole k-byte blocks with one key and concatenate the plaintexts. With implicit rejection
 * (checked at startup) a wrong key or tampered block yields pseudo-random bytes instead of an error, so this never
 * tells a caller whether the padding was right; the record parser rejects the garbage. Returns `undefined` only if
 * OpenSSL refuses outright (a runtime without implicit rejection, which ingest does not start on).
 */
export function decryptBlocks(ciphertext: Buffer, key: RingKey): Buffer | undefined {
  const k = key.blockBytes;
  const { decrypt } = decryptorOf(key.privateKey);
  const parts: Buffer[] = [];
  for (let at = 0; at < ciphertext.length; at += k) {
    try {
      parts.push(decrypt(ciphertext.subarray(at, at + k)));
    } catch {
      return undefined;
    }
  }
  return Buffer.concat(parts);
}
