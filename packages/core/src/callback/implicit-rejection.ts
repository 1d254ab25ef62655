import { constants, generateKeyPairSync, privateDecrypt, publicEncrypt, type KeyObject } from 'node:crypto';
import { AppError, ErrorCodes, firstLineOf } from '../errors.ts';

type Decrypt = (key: KeyObject, block: Buffer) => Buffer;

const nodeDecrypt: Decrypt = (key, block) => privateDecrypt({ key, padding: constants.RSA_PKCS1_PADDING }, block);

/**
 * Two ciphertext blocks under `publicKey` whose PKCS#1 v1.5 padding is malformed: a wrong block type (00 01), and a
 * type-2 block without the zero separator. Implicit rejection decrypts each to deterministic pseudo-random bytes.
 */
export function malformedPkcs1Blocks(publicKey: KeyObject): Buffer[] {
  const k = Math.ceil((publicKey.asymmetricKeyDetails?.modulusLength ?? 0) / 8);
  return [0x01, 0x02].map((blockType) => {
    const malformed = Buffer.alloc(k, 0x5a);
    malformed[0] = 0x00;
    malformed[1] = blockType;
    return publicEncrypt({ key: publicKey, padding: constants.RSA_NO_PADDING }, malformed);
  });
}

/**
 * Why the runtime is unusable, or `undefined` when RSA PKCS#1 v1.5 decryption uses implicit rejection: a block with
 * malformed padding must decrypt (to deterministic pseudo-random bytes) instead of throwing. A runtime that throws
 * (OpenSSL < 3.2, or Node's CVE-2023-46809 guard) would make the receiver a Bleichenbacher/Marvin padding oracle.
 * @param decrypt injectable for tests of the refusal path
 */
export function probeImplicitRejection(decrypt: Decrypt = nodeDecrypt): string | undefined {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
  const runtime = `Node ${process.versions.node} with OpenSSL ${process.versions.openssl}`;
  for (const block of malformedPkcs1Blocks(publicKey)) {
    let first: Buffer;
    let second: Buffer;
    try {
      first = decrypt(privateKey, block);
      second = decrypt(privateKey, block);
    } catch (e) {
      const msg = firstLineOf(e);
      return `${runtime} rejects malformed RSA PKCS#1 v1.5 padding with an error ("${msg}") instead of implicit rejection`;
    }
    if (!first.equals(second))
      return `${runtime} returns non-deterministic output for malformed RSA PKCS#1 v1.5 padding`;
  }
  return undefined;
}

let verified = false;

/**
 * Refuse to run on a runtime without RSA implicit rejection (CVE-2023-46809): callbacks are PKCS#1 v1.5 encrypted,
 * and a decryptor that reveals padding errors is a padding oracle. Use Node ≥ 22.20 or ≥ 24.5 (OpenSSL ≥ 3.2).
 * @throws AppError RUNTIME_NO_IMPLICIT_REJECTION with the reason
 */
export function assertImplicitRejection(): void {
  if (verified) return;
  const why = probeImplicitRejection();
  if (why !== undefined) {
    throw new AppError(
      ErrorCodes.RUNTIME_NO_IMPLICIT_REJECTION,
      `${why}. Decrypting callbacks here would expose a padding oracle (CVE-2023-46809, Marvin attack); ` +
        'run on Node >= 22.20 or >= 24.5, whose OpenSSL (>= 3.2) has implicit rejection.',
    );
  }
  verified = true;
}
