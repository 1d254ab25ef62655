import { AppError, ErrorCodes, isAppError } from '../errors.ts';
import type { CallbackJobInput, CallbackKind } from '../queue/index.ts';
import { decodeStrictBase64 } from './base64.ts';
import type { KeyRing, RingKey } from './key-ring.ts';
import { parseRecord, type CallbackRecord } from './record.ts';
import { decryptBlocks } from './rsa-blocks.ts';

/**
 * Blocks one callback may have unless configured (INGEST_MAX_BLOCKS). A genuine record fits in one block of a
 * 2048-bit key; every block costs one RSA private operation, so the count is checked before any decryption.
 */
export const MAX_CALLBACK_BLOCKS = 4;

/** Options of {@link decodeCallback}. */
export interface DecodeCallbackOptions {
  keyRing: KeyRing;
  /** Our merchant number; a record for another merchant is refused. */
  merchantNo: string;
  /** The kind the route expects (`/callbacks/payin`, `/callbacks/payout`); omitted on `/callbacks`. */
  expectedKind?: CallbackKind;
  /** Clock for `receivedAt`. @defaultValue () => new Date() */
  now?: () => Date;
  /** Most RSA blocks accepted, checked before any decryption (INGEST_MAX_BLOCKS). @defaultValue {@link MAX_CALLBACK_BLOCKS} */
  maxBlocks?: number;
}

/** A decoded callback and which key of the ring opened it (its index: 0 is current, more means pre-rotation). */
export interface DecodedCallback {
  job: CallbackJobInput;
  keyId: string;
  keyIndex: number;
}

function fail(
  code: (typeof ErrorCodes)[keyof typeof ErrorCodes],
  message: string,
  details?: Record<string, unknown>,
): AppError {
  return new AppError(code, message, { details });
}

/** The ciphertext carried by a body `{ "encryptedData": "<Base64>" }`. */
function ciphertextOf(body: unknown, ring: KeyRing, maxBlocks: number): Buffer {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !Object.hasOwn(body, 'encryptedData')) {
    throw fail(ErrorCodes.CALLBACK_BAD_REQUEST, 'body is not a JSON object with encryptedData');
  }
  const encrypted = (body as { encryptedData: unknown }).encryptedData;
  if (typeof encrypted !== 'string') throw fail(ErrorCodes.CALLBACK_BAD_REQUEST, 'encryptedData is not a string');
  // Longer than the most blocks of the ring's largest key could be: refused before it is even Base64-decoded.
  const largest = Math.max(...ring.keys.map((k) => k.blockBytes));
  if (encrypted.length > Math.ceil((maxBlocks * largest) / 3) * 4) {
    throw fail(ErrorCodes.CALLBACK_CIPHERTEXT_LENGTH, `ciphertext has more than ${maxBlocks} blocks`, {
      chars: encrypted.length,
    });
  }
  const ciphertext = decodeStrictBase64(encrypted);
  if (ciphertext === undefined) throw fail(ErrorCodes.CALLBACK_BASE64_INVALID, 'encryptedData is not strict Base64');
  return ciphertext;
}

// When every key fails, report the error of the key that got furthest (a schema error means the record decrypted).
const PROGRESS: Partial<Record<string, number>> = {
  [ErrorCodes.CALLBACK_DECRYPT_FAILED]: 0,
  [ErrorCodes.CALLBACK_JSON_INVALID]: 1,
  [ErrorCodes.CALLBACK_SCHEMA_INVALID]: 2,
  [ErrorCodes.CALLBACK_STATE_INVALID]: 3,
};

/** Try the ring's keys in order (current first); the first that yields a valid record wins. */
function openWithRing(
  ciphertext: Buffer,
  ring: KeyRing,
  maxBlocks: number,
): { record: CallbackRecord; key: RingKey; index: number } {
  const candidates = ring.keys
    .map((key, index) => ({ key, index }))
    .filter(({ key }) => ciphertext.length > 0 && ciphertext.length % key.blockBytes === 0);
  if (candidates.length === 0) {
    throw fail(
      ErrorCodes.CALLBACK_CIPHERTEXT_LENGTH,
      `ciphertext of ${ciphertext.length} bytes is not a whole number of key-size blocks`,
      {
        bytes: ciphertext.length,
      },
    );
  }
  // Before any RSA work: a ciphertext of more blocks than allowed costs one length check, not N decryptions.
  if (candidates.every(({ key }) => ciphertext.length / key.blockBytes > maxBlocks)) {
    throw fail(ErrorCodes.CALLBACK_CIPHERTEXT_LENGTH, `ciphertext has more than ${maxBlocks} blocks`, {
      bytes: ciphertext.length,
    });
  }
  let best: AppError | undefined;
  for (const { key, index } of candidates) {
    if (ciphertext.length / key.blockBytes > maxBlocks) continue;
    const plaintext = decryptBlocks(ciphertext, key);
    let error: AppError;
    if (plaintext === undefined) {
      error = fail(ErrorCodes.CALLBACK_DECRYPT_FAILED, 'no key of the ring decrypts the ciphertext');
    } else {
      try {
        return { record: parseRecord(plaintext), key, index };
      } catch (e) {
        if (!isAppError(e)) throw e;
        error = e;
      }
    }
    if (best === undefined || (PROGRESS[error.code] ?? 0) > (PROGRESS[best.code] ?? 0)) best = error;
  }
  if (best?.code === ErrorCodes.CALLBACK_JSON_INVALID && candidates.length > 1) {
    best = fail(
      ErrorCodes.CALLBACK_JSON_INVALID,
      `no key of the ring (${candidates.length} tried) yields a JSON record: wrong key, tampered ciphertext or non-JSON plaintext`,
    );
  }
  throw best ?? fail(ErrorCodes.CALLBACK_DECRYPT_FAILED, 'no key of the ring decrypts the ciphertext');
}

/** {@link decodeCallback}, also saying which key opened the record (for rotation monitoring). */
export function decodeCallbackDetailed(body: unknown, opts: DecodeCallbackOptions): DecodedCallback {
  const maxBlocks = opts.maxBlocks ?? MAX_CALLBACK_BLOCKS;
  const { record, key, index } = openWithRing(ciphertextOf(body, opts.keyRing, maxBlocks), opts.keyRing, maxBlocks);
  const ids = { kind: record.kind, orderNo: record.orderNo, state: record.state };
  if (record.merchantNo !== opts.merchantNo) {
    throw fail(ErrorCodes.CALLBACK_MERCHANT_MISMATCH, 'MerchantNo is not ours', {
      ...ids,
      merchantNo: record.merchantNo.slice(0, 32),
    });
  }
  if (opts.expectedKind !== undefined && record.kind !== opts.expectedKind) {
    throw fail(ErrorCodes.CALLBACK_KIND_MISMATCH, `a ${record.kind} record on the ${opts.expectedKind} route`, ids);
  }
  const receivedAt = (opts.now?.() ?? new Date()).toISOString();
  const job: CallbackJobInput = { ...record, receivedAt, source: 'callback' };
  return { job, keyId: key.id, keyIndex: index };
}

/**
 * Decode one callback body: strict Base64 → RSA PKCS#1 v1.5 block-by-block decryption with the key ring → lossless
 * JSON → case-insensitive record schema → merchant and kind checks. Returns the job payload of `callbackJobSchema`.
 * @throws AppError with a CALLBACK_* code; its message and details never contain the body or decrypted values
 *   beyond order numbers and states.
 */
export function decodeCallback(body: unknown, opts: DecodeCallbackOptions): CallbackJobInput {
  return decodeCallbackDetailed(body, opts).job;
}
