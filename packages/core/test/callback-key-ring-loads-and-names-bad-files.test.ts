import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeyPair, loadKeyRing, loadKeyRingFromFiles } from '@mcb/core/callback';
import { AppError, ErrorCodes } from '@mcb/core/errors';

const dir = mkdtempSync(join(tmpdir(), 'mcb-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const a = generateKeyPair();
const b = generateKeyPair();
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

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

describe('key ring', () => {
  it('loads comma-separated files and multi-key files in order, current first, without duplicates', () => {
    const pa = file('a.pem', a.privateKeyPem);
    const both = file('both.pem', b.privateKeyPem + a.privateKeyPem);
    const ring = loadKeyRingFromFiles([`${pa}, ${both}`]);
    expect(ring.keys).toHaveLength(2);
    expect(ring.keys[0]?.label).toBe(pa);
    expect(ring.keys.map((k) => k.bits)).toEqual([2048, 2048]);
    expect(ring.keys[1]?.id).toBe(loadKeyRing([b.privateKeyPem]).keys[0]?.id);
  });

  it('names a missing file', () => {
    expect(keyError(() => loadKeyRingFromFiles([join(dir, 'nope.pem')])).message).toContain('nope.pem');
  });

  it('names a file that holds no private key, without echoing its content', () => {
    const pub = file('pub.pem', a.publicKeyPem);
    const garbage = file('garbage.pem', '-----BEGIN PRIVATE KEY-----\nTOPSECRETGARBAGE\n-----END PRIVATE KEY-----\n');
    expect(keyError(() => loadKeyRingFromFiles([pub])).message).toContain('pub.pem');
    const e = keyError(() => loadKeyRingFromFiles([garbage]));
    expect(e.message).toContain('garbage.pem');
    expect(e.message).not.toContain('TOPSECRET');
  });

  it('refuses non-RSA and too-small keys, and an empty ring', () => {
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    expect(keyError(() => loadKeyRing([ec])).message).toMatch(/expected an RSA private key/);
    const small = generateKeyPairSync('rsa', { modulusLength: 512 })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
    expect(keyError(() => loadKeyRing([small])).message).toMatch(/too small/);
    keyError(() => loadKeyRing([]));
    keyError(() => loadKeyRingFromFiles([' , ']));
  });

  it('generateKeyPair gives a private PEM, a public PEM and the Base64 DER SPKI a merchant uploads', () => {
    expect(a.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(a.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    expect(a.publicKeyBase64).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect(a.publicKeyPem.replace(/-----[^-]+-----|\s/g, '')).toBe(a.publicKeyBase64);
    expect(() => generateKeyPair(1024)).toThrow(RangeError);
  });
});
