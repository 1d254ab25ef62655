/**
 * One key ring per merchant (docs/merchants.md): each merchant's callbacks are decrypted with its own ring only, so
 * a key may belong to one merchant alone. Loaded once at start; a bad entry stops the process with one message that
 * names the merchant and the field, never a key's content.
 */
import { generateKeyPairSync } from 'node:crypto';
import type { Merchant } from '../config/merchants.ts';
import { AppError, ErrorCodes, isAppError } from '../errors.ts';
import { keyRingOf, keysOfFile, loadKeyRing, type KeyRing, type RingKey } from './key-ring.ts';

/** Each merchant's key ring by its ref. */
export type MerchantKeyRings = ReadonlyMap<string, KeyRing>;

/** Options of {@link loadMerchantKeyRings}. */
export interface MerchantKeyRingsOptions {
  /**
   * Where the merchants came from, for the errors: `MERCHANTS_FILE` names each entry and field
   * (`merchants[1] ("b").privateKeyFiles[0]`); `MERCHANT_PRIVATE_KEY_FILE` names today's variable (the one
   * `default` merchant it makes). @defaultValue 'MERCHANTS_FILE'
   */
  source?: 'MERCHANTS_FILE' | 'MERCHANT_PRIVATE_KEY_FILE';
}

/** Where a key file came from: its merchant's entry and its position in the merchant's privateKeyFiles. */
interface KeyOrigin {
  merchant: Merchant;
  index: number;
  file: number;
}

/** The field a key file sits in, as an operator finds it in MERCHANTS_FILE (or in MERCHANT_PRIVATE_KEY_FILE). */
function fieldName(o: KeyOrigin, source: MerchantKeyRingsOptions['source']): string {
  return source === 'MERCHANT_PRIVATE_KEY_FILE'
    ? `MERCHANT_PRIVATE_KEY_FILE[${o.file}]`
    : `MERCHANTS_FILE: merchants[${o.index}] ("${o.merchant.ref}").privateKeyFiles[${o.file}]`;
}

/**
 * Each merchant's key ring, current key first, from its `privateKeyFiles`. Refused, all in ONE error: a file that
 * cannot be read, holds no RSA private key or too small a one, a merchant without any key, and a key (the same public
 * key fingerprint) in the rings of two merchants, since a callback must open for the merchant of its route only.
 * @throws AppError KEY_FILE_INVALID whose message has one line per problem, each naming the entry and field
 */
export function loadMerchantKeyRings(
  merchants: readonly Merchant[],
  options: MerchantKeyRingsOptions = {},
): MerchantKeyRings {
  const source = options.source ?? 'MERCHANTS_FILE';
  const problems: string[] = [];
  const rings = new Map<string, KeyRing>();
  const owner = new Map<string, KeyOrigin>();
  merchants.forEach((merchant, index) => {
    const keys: RingKey[] = [];
    merchant.privateKeyFiles.forEach((path, file) => {
      const origin = { merchant, index, file };
      let found: RingKey[];
      try {
        found = keysOfFile(path);
      } catch (e) {
        if (!isAppError(e)) throw e;
        // The codec's message names the file and what is wrong with it, never its content.
        return void problems.push(`${fieldName(origin, source)}: ${e.message}`);
      }
      for (const key of found) {
        const first = owner.get(key.id);
        if (first && first.merchant !== merchant) {
          problems.push(
            `${fieldName(origin, source)}: ${path} holds the same key (public key fingerprint ${key.id}) as ` +
              `${fieldName(first, source).replace(/^MERCHANTS_FILE: /, '')}; each merchant number has its own key pair`,
          );
        }
        owner.set(key.id, first ?? origin);
      }
      keys.push(...found);
    });
    if (merchant.privateKeyFiles.length === 0) {
      problems.push(
        source === 'MERCHANT_PRIVATE_KEY_FILE'
          ? 'MERCHANT_PRIVATE_KEY_FILE: no PEM file given'
          : `MERCHANTS_FILE: merchants[${index}] ("${merchant.ref}").privateKeyFiles: no PEM file given`,
      );
    }
    if (keys.length > 0) rings.set(merchant.ref, keyRingOf(keys));
  });
  if (problems.length > 0) {
    const message =
      problems.length === 1
        ? problems[0]!
        : `${problems.length} problems with the merchants' private keys:\n  - ${problems.join('\n  - ')}`;
    throw new AppError(ErrorCodes.KEY_FILE_INVALID, message, { details: { problems } });
  }
  return rings;
}

const decoys = new Map<string, KeyRing>();

/**
 * A ring shaped like the merchants' usual one (the key sizes most of `rings` have, in order) of keys generated now
 * and held by no one. A callback to a ref no merchant has is decrypted with it and then refused, so that its refusal
 * costs what a wrong key's does at a real ref: the time of a reply does not tell a stranger which refs exist.
 * Generated once per shape per process (RSA key generation takes a moment).
 */
export function decoyKeyRing(rings: Iterable<KeyRing>): KeyRing {
  const shapes = new Map<string, { bits: number[]; count: number }>();
  for (const ring of rings) {
    const bits = ring.keys.map((k) => k.bits);
    const shape = shapes.get(bits.join(',')) ?? { bits, count: 0 };
    shape.count++;
    shapes.set(bits.join(','), shape);
  }
  // The most common shape; on a tie the first merchant's. No ring at all: one key of the size `keys generate` makes.
  const bits = [...shapes.values()].reduce<{ bits: number[]; count: number } | undefined>(
    (best, s) => (best === undefined || s.count > best.count ? s : best),
    undefined,
  )?.bits ?? [2048];
  const shape = bits.join(',');
  let decoy = decoys.get(shape);
  if (!decoy) {
    const pems = bits.map((modulusLength) =>
      generateKeyPairSync('rsa', { modulusLength, publicExponent: 0x10001 })
        .privateKey.export({ type: 'pkcs8', format: 'pem' })
        .toString(),
    );
    decoy = loadKeyRing(pems);
    decoys.set(shape, decoy);
  }
  return decoy;
}
