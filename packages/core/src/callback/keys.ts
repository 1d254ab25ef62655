import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { AppError, ErrorCodes } from '../errors.ts';

/** A new merchant key pair. Only `privateKeyPem` is secret. */
export interface GeneratedKeyPair {
  /** PKCS#8 PEM: ours, kept in `MERCHANT_PRIVATE_KEY_FILE`. */
  privateKeyPem: string;
  /** SPKI PEM of the public key. */
  publicKeyPem: string;
  /** DER SPKI in Base64 on one line: the form a merchant uploads to the platform's console. */
  publicKeyBase64: string;
}

/** Generate an RSA key pair for callbacks. @param bits modulus size @defaultValue 2048 */
export function generateKeyPair(bits = 2048): GeneratedKeyPair {
  if (!Number.isInteger(bits) || bits < 2048 || bits > 8192 || bits % 8 !== 0) {
    throw new RangeError(`RSA key size must be a multiple of 8 between 2048 and 8192 bits (got ${bits})`);
  }
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits, publicExponent: 0x10001 });
  return {
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    publicKeyBase64: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
  };
}

/** A public key from PEM (SPKI or PKCS#1) or from Base64 DER SPKI as uploaded to the console. */
export function parsePublicKey(text: string): KeyObject {
  try {
    const key = text.includes('-----BEGIN')
      ? createPublicKey({ key: text, format: 'pem' })
      : createPublicKey({ key: Buffer.from(text.replace(/\s+/g, ''), 'base64'), format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'rsa') throw new Error(`not an RSA key (${key.asymmetricKeyType})`);
    return key;
  } catch (e) {
    throw new AppError(ErrorCodes.KEY_FILE_INVALID, 'not a usable RSA public key (PEM or Base64 DER SPKI expected)', {
      cause: e,
    });
  }
}
