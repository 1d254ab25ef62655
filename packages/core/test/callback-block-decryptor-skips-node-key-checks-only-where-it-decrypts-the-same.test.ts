import { constants, generateKeyPairSync, KeyObject, privateDecrypt, publicEncrypt, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateKeyPair, loadKeyRing, prepareDecryption } from '@mcb/core/callback';
import { blockDecryptor } from '../src/callback/rsa-blocks.ts';

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const k = 256;
const documented = (block: Buffer) => privateDecrypt({ key: privateKey, padding: constants.RSA_PKCS1_PADDING }, block);
const wellFormed = (plaintext: Buffer) =>
  publicEncrypt({ key: publicKey, padding: constants.RSA_PKCS1_PADDING }, plaintext);
/** A block whose padding is wrong: implicit rejection turns it into pseudo-random bytes instead of an error. */
const malformed = () => {
  const raw = randomBytes(k);
  raw[0] = 0x00;
  raw[1] = 0x01;
  return publicEncrypt({ key: publicKey, padding: constants.RSA_NO_PADDING }, raw);
};

describe('the block decryptor', () => {
  it('decrypts well-formed and malformed blocks exactly as the documented call does', () => {
    const d = blockDecryptor(privateKey);
    // On this runtime (Node 24) the key copy carrying its padding is honoured. If a Node release stops reading it,
    // this line fails while callbacks still decrypt (the documented call takes over): the speed-up is gone, not more.
    expect(d.fast).toBe(true);
    for (let i = 0; i < 5; i++) {
      const plaintext = randomBytes(100 + i);
      expect(d.decrypt(wellFormed(plaintext))).toEqual(plaintext);
      const bad = malformed();
      expect(d.decrypt(bad)).toEqual(documented(bad));
    }
  });

  it('leaves the ring key as it was: its own default padding is not changed', () => {
    blockDecryptor(privateKey);
    expect(Object.getOwnPropertyNames(privateKey)).not.toContain('padding');
    const oaep = publicEncrypt(publicKey, Buffer.from('oaep')); // the default padding is OAEP
    expect(privateDecrypt(privateKey, oaep).toString()).toBe('oaep');
  });

  it('falls back to the documented call on a runtime that ignores a key object padding', () => {
    // Such a runtime decrypts a bare KeyObject with its default padding (OAEP), which fails on a PKCS#1 v1.5 block.
    const d = blockDecryptor(privateKey, (arg, block) =>
      arg instanceof KeyObject
        ? privateDecrypt({ key: arg, padding: constants.RSA_PKCS1_OAEP_PADDING }, block)
        : privateDecrypt(arg, block),
    );
    expect(d.fast).toBe(false);
    const plaintext = randomBytes(64);
    expect(d.decrypt(wellFormed(plaintext))).toEqual(plaintext);
  });

  it('falls back when the fast form answers a malformed block with other bytes than the documented call', () => {
    // The check's first call of the fast form is its well-formed probe, let through; malformed blocks come after.
    let fastCalls = 0;
    const d = blockDecryptor(privateKey, (arg, block) => {
      if (!(arg instanceof KeyObject)) return privateDecrypt(arg, block);
      const out = privateDecrypt({ key: arg, padding: constants.RSA_PKCS1_PADDING }, block);
      return fastCalls++ === 0 ? out : Buffer.from('other bytes');
    });
    expect(fastCalls).toBe(2);
    expect(d.fast).toBe(false);
    const bad = malformed();
    expect(d.decrypt(bad)).toEqual(documented(bad));
  });

  it('prepareDecryption checks every key of a ring before any callback and names the call each one uses', () => {
    const ring = loadKeyRing([generateKeyPair().privateKeyPem, generateKeyPair().privateKeyPem]);
    expect(prepareDecryption(ring.keys)).toEqual(['fast', 'fast']);
  });
});
