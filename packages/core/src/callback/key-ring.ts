import { createHash, createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppError, ErrorCodes, firstLineOf } from '../errors.ts';

/** Smallest modulus we accept from a key file. Older platforms issue 1024-bit keys; `keys generate` makes 2048+. */
const MIN_BITS = 1024;

/** One private key of the ring. Holds no PEM text: nothing here is safe to log but `id` and `bits`. */
export interface RingKey {
  /** Where the key came from (file path and position, or `key #n`); for logs and errors. */
  readonly label: string;
  /** First 16 hex digits of the SHA-256 of the public key's DER SPKI; identifies the key without revealing it. */
  readonly id: string;
  /** Modulus size in bits. */
  readonly bits: number;
  /** k: the modulus size in bytes, which is also the size of one ciphertext block. */
  readonly blockBytes: number;
  readonly privateKey: KeyObject;
}

/** The merchant's private keys, current first; older ones are tried for callbacks encrypted before a rotation. */
export interface KeyRing {
  readonly keys: readonly RingKey[];
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----[\s\S]*?-----END \1-----/g;

function invalid(label: string, why: string, cause?: unknown): AppError {
  return new AppError(ErrorCodes.KEY_FILE_INVALID, `${label}: ${why}`, { cause, details: { key: label } });
}

function toRingKey(pem: string, label: string): RingKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: pem, format: 'pem' });
  } catch (e) {
    // The OpenSSL message names the problem (encrypted, unsupported, malformed) without echoing the key.
    const reason = e instanceof Error ? firstLineOf(e) : 'unreadable';
    throw invalid(label, `not a usable PEM private key (${reason}); expected an unencrypted RSA private key`, e);
  }
  if (privateKey.asymmetricKeyType !== 'rsa') {
    throw invalid(label, `is a ${privateKey.asymmetricKeyType ?? 'non-asymmetric'} key; expected an RSA private key`);
  }
  const bits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < MIN_BITS) throw invalid(label, `RSA key of ${bits} bits is too small (at least ${MIN_BITS})`);
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const id = createHash('sha256').update(spki).digest('hex').slice(0, 16);
  return { label, id, bits, blockBytes: Math.ceil(bits / 8), privateKey };
}

/** A ring of `keys`, current first, each key once. @throws AppError KEY_FILE_INVALID when there is none. */
export function keyRingOf(keys: RingKey[]): KeyRing {
  if (keys.length === 0) throw invalid('key ring', 'no private key given');
  const seen = new Set<string>();
  // The same key listed twice would only cost a second decryption per failure; keep the first occurrence.
  const unique = keys.filter((k) => !seen.has(k.id) && seen.add(k.id));
  return Object.freeze({ keys: Object.freeze(unique) });
}

/** Split a text holding one or more PEM private keys into its blocks, in order. */
function privateKeyBlocks(text: string): string[] {
  return [...text.matchAll(PEM_BLOCK)].filter((m) => m[1]?.endsWith('PRIVATE KEY')).map((m) => m[0]);
}

/**
 * Build a key ring from PEM texts, current key first. Each text may hold several keys (in order).
 * @throws AppError KEY_FILE_INVALID naming the offending entry (`key #n`), never its content.
 */
export function loadKeyRing(pems: string[]): KeyRing {
  const keys: RingKey[] = [];
  pems.forEach((pem, i) => {
    const blocks = privateKeyBlocks(pem);
    if (blocks.length === 0) throw invalid(`key #${i + 1}`, 'holds no PEM private key block');
    blocks.forEach((block, j) =>
      keys.push(toRingKey(block, blocks.length > 1 ? `key #${i + 1}.${j + 1}` : `key #${i + 1}`)),
    );
  });
  return keyRingOf(keys);
}

/**
 * Build a key ring from PEM files (`MERCHANT_PRIVATE_KEY_FILE`, split on commas by the caller or here), current
 * first. @throws AppError KEY_FILE_INVALID naming the file (and the key's position in it), never its content.
 */
export function loadKeyRingFromFiles(paths: string[]): KeyRing {
  const files = paths
    .flatMap((p) => p.split(','))
    .map((p) => p.trim())
    .filter((p) => p !== '');
  return keyRingOf(files.flatMap(keysOfFile));
}

/**
 * The private keys of one PEM file, in order (a file may hold several).
 * @throws AppError KEY_FILE_INVALID naming the file (and the key's position in it), never its content.
 */
export function keysOfFile(file: string): RingKey[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw invalid(file, `cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`, e);
  }
  const blocks = privateKeyBlocks(text);
  if (blocks.length === 0) throw invalid(file, 'holds no PEM private key block (-----BEGIN ... PRIVATE KEY-----)');
  return blocks.map((block, j) => toRingKey(block, blocks.length > 1 ? `${file} (key ${j + 1})` : file));
}
