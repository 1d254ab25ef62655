import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decoyKeyRing, generateKeyPair, loadKeyRing, loadMerchantKeyRings } from '@mcb/core/callback';
import type { Merchant } from '@mcb/core/config';
import { AppError, ErrorCodes } from '@mcb/core/errors';

const dir = mkdtempSync(join(tmpdir(), 'mcb-merchant-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const [a, b, old] = [generateKeyPair(), generateKeyPair(), generateKeyPair()];
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const aFile = file('a.pem', a.privateKeyPem);
const bFile = file('b.pem', b.privateKeyPem);
const oldFile = file('old.pem', old.privateKeyPem);

const merchant = (ref: string, privateKeyFiles: string[]): Merchant => ({
  ref,
  merchantNo: `M-${ref}`,
  privateKeyFiles,
  platformBaseUrl: undefined,
  getOrderRps: undefined,
  weight: 1,
  legacyRoutes: false,
});

function keyError(fn: () => unknown): AppError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    expect((e as AppError).code).toBe(ErrorCodes.KEY_FILE_INVALID);
    return e as AppError;
  }
  throw new Error('expected KEY_FILE_INVALID');
}

describe('loadMerchantKeyRings', () => {
  it("gives each merchant its own ring, current key first, and no other merchant's key", () => {
    const rings = loadMerchantKeyRings([merchant('a', [aFile, oldFile]), merchant('b', [bFile])]);
    const id = (pem: string) => loadKeyRing([pem]).keys[0]!.id;
    expect([...rings.keys()]).toEqual(['a', 'b']);
    expect(rings.get('a')!.keys.map((k) => k.id)).toEqual([id(a.privateKeyPem), id(old.privateKeyPem)]);
    expect(rings.get('b')!.keys.map((k) => k.id)).toEqual([id(b.privateKeyPem)]);
  });

  it('names the entry and the field of an unreadable file', () => {
    const e = keyError(() =>
      loadMerchantKeyRings([merchant('a', [aFile]), merchant('b', [bFile, join(dir, 'missing.pem')])]),
    );
    expect(e.message).toBe(
      `MERCHANTS_FILE: merchants[1] ("b").privateKeyFiles[1]: ${join(dir, 'missing.pem')}: cannot be read (ENOENT)`,
    );
  });

  it('names the entry and the field of an invalid key, and never its content', () => {
    const garbage = file('garbage.pem', '-----BEGIN PRIVATE KEY-----\nTOPSECRETGARBAGE\n-----END PRIVATE KEY-----\n');
    const pub = file('pub.pem', a.publicKeyPem);
    const e = keyError(() => loadMerchantKeyRings([merchant('a', [garbage]), merchant('b', [pub])]));
    // Two problems, one error: each line names its entry and field.
    expect(e.message).toMatch(/^2 problems with the merchants' private keys:\n/);
    expect(e.message).toContain('MERCHANTS_FILE: merchants[0] ("a").privateKeyFiles[0]: ');
    expect(e.message).toContain('not a usable PEM private key');
    expect(e.message).toContain('MERCHANTS_FILE: merchants[1] ("b").privateKeyFiles[0]: ');
    expect(e.message).toContain('holds no PEM private key block');
    expect(e.message).not.toContain('TOPSECRET');
    expect(e.message).not.toContain(a.publicKeyBase64.slice(0, 40));
  });

  it('refuses a key in the rings of two merchants, naming both entries and never the key', () => {
    const copy = file('a-copy.pem', a.privateKeyPem);
    const e = keyError(() => loadMerchantKeyRings([merchant('a', [aFile]), merchant('b', [bFile, copy])]));
    const id = loadKeyRing([a.privateKeyPem]).keys[0]!.id;
    expect(e.message).toBe(
      `MERCHANTS_FILE: merchants[1] ("b").privateKeyFiles[1]: ${copy} holds the same key (public key fingerprint ` +
        `${id}) as merchants[0] ("a").privateKeyFiles[0]; each merchant number has its own key pair`,
    );
    expect(e.message).not.toContain('PRIVATE KEY');
  });

  it('accepts the same key listed twice by one merchant (kept once)', () => {
    const rings = loadMerchantKeyRings([merchant('a', [aFile, file('a-again.pem', a.privateKeyPem)])]);
    expect(rings.get('a')!.keys).toHaveLength(1);
  });

  it("names today's variable for the merchant MERCHANT_PRIVATE_KEY_FILE makes", () => {
    const e = keyError(() =>
      loadMerchantKeyRings([merchant('default', [aFile, join(dir, 'gone.pem')])], {
        source: 'MERCHANT_PRIVATE_KEY_FILE',
      }),
    );
    expect(e.message).toBe(`MERCHANT_PRIVATE_KEY_FILE[1]: ${join(dir, 'gone.pem')}: cannot be read (ENOENT)`);
  });
});

describe('decoyKeyRing', () => {
  it("has the key sizes most merchants' rings have, and none of their keys", () => {
    const rings = loadMerchantKeyRings([
      merchant('a', [aFile, oldFile]),
      merchant('b', [bFile]),
      merchant('c', [file('c.pem', generateKeyPair(3072).privateKeyPem)]),
      merchant('d', [file('d.pem', generateKeyPair().privateKeyPem)]),
    ]);
    const decoy = decoyKeyRing(rings.values());
    expect(decoy.keys.map((k) => k.bits)).toEqual([2048]);
    const real = new Set([...rings.values()].flatMap((r) => r.keys.map((k) => k.id)));
    expect(decoy.keys.some((k) => real.has(k.id))).toBe(false);
    // Made once per shape: a second ingest app in the same process reuses it.
    expect(decoyKeyRing(rings.values())).toBe(decoy);
  });
});
