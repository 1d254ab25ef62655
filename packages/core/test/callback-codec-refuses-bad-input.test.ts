import { createPublicKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decodeCallback, encryptRecord, generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { AppError, ErrorCodes, type ErrorCode } from '@mcb/core/errors';

const ours = generateKeyPair();
const stranger = generateKeyPair();
const ring = loadKeyRing([ours.privateKeyPem]);
const opts = { keyRing: ring, merchantNo: 'M100001' };

const payin: Record<string, unknown> = {
  OrderNo: 'P1',
  MerchantNo: 'M100001',
  MerchantOrderNo: 'secret-order-77',
  PayTime: '2024-05-01T08:30:00',
  OrderState: 6,
  Quantity: 12.5,
  FiatCurrency: 100,
};

function codeOf(body: unknown, o: Parameters<typeof decodeCallback>[1] = opts): ErrorCode | 'accepted' {
  try {
    decodeCallback(body, o);
    return 'accepted';
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    return (e as AppError).code;
  }
}
const enc = (record: object | string, key = ours.publicKeyPem) => ({ encryptedData: encryptRecord(record, key) });

/** Whether a ciphertext's first block, read as a big-endian number, is below the public key's modulus. */
function belowModulus(ciphertext: Buffer, publicKeyPem: string): boolean {
  const { n } = createPublicKey(publicKeyPem).export({ format: 'jwk' });
  const modulus = Buffer.from(n!, 'base64url');
  return BigInt(`0x${ciphertext.subarray(0, modulus.length).toString('hex')}`) < BigInt(`0x${modulus.toString('hex')}`);
}

describe('callback codec refuses bad input with a CALLBACK_* code', () => {
  it('refuses a body that is not an object with a string encryptedData', () => {
    for (const body of [null, 'x', [], {}, { encryptedData: 5 }, { EncryptedData: 'AAAA' }]) {
      expect(codeOf(body)).toBe(ErrorCodes.CALLBACK_BAD_REQUEST);
    }
  });

  it('refuses non-strict Base64: foreign characters, whitespace, missing padding, non-canonical bits, empty', () => {
    const good = enc(payin).encryptedData;
    for (const bad of [
      '',
      `${good.slice(0, 10)}*${good.slice(11)}`,
      `${good.slice(0, 76)}\n${good.slice(76)}`,
      good.replace(/=+$/, '') + 'A',
      'QR==',
    ]) {
      expect(codeOf({ encryptedData: bad })).toBe(ErrorCodes.CALLBACK_BASE64_INVALID);
    }
    expect(codeOf({ encryptedData: good.replace(/\+/g, '-').replace(/\//g, '_') })).not.toBe('accepted');
  });

  it('refuses a ciphertext that is not a whole number of key-size blocks', () => {
    const ct = Buffer.from(enc(payin).encryptedData, 'base64');
    expect(codeOf({ encryptedData: ct.subarray(0, 255).toString('base64') })).toBe(
      ErrorCodes.CALLBACK_CIPHERTEXT_LENGTH,
    );
    expect(codeOf({ encryptedData: Buffer.concat([ct, Buffer.alloc(3)]).toString('base64') })).toBe(
      ErrorCodes.CALLBACK_CIPHERTEXT_LENGTH,
    );
  });

  it('a tampered ciphertext or a wrong key yields garbage that fails as JSON, never a decryption exception', () => {
    // Each ciphertext is freshly (randomly) padded, so a flipped bit may lift the block to our modulus or above, which
    // OpenSSL refuses before any padding is looked at (DECRYPT_FAILED). The code is asserted from the tampered value,
    // never left to chance; a second tamper only ever lowers the block (clears its lowest set bit), so it stays below
    // the modulus and must fail as JSON on every run.
    const ct = Buffer.from(enc(payin).encryptedData, 'base64');
    for (const at of [0, 1, 100, 255]) {
      const flipped = Buffer.from(ct);
      flipped[at] = ct[at]! ^ 0x01;
      const expected = belowModulus(flipped, ours.publicKeyPem)
        ? ErrorCodes.CALLBACK_JSON_INVALID
        : ErrorCodes.CALLBACK_DECRYPT_FAILED;
      expect({ at, code: codeOf({ encryptedData: flipped.toString('base64') }) }).toEqual({ at, code: expected });
      const lowered = Buffer.from(ct);
      // A zero byte has no set bit to clear: lower the byte before it instead (borrowing keeps the value smaller).
      const where = ct[at] !== 0 ? at : ct.subarray(0, at).findLastIndex((b) => b !== 0);
      if (where < 0) continue; // the block is zero up to here: nothing to lower without changing a later byte up
      lowered[where] = ct[where]! & (ct[where]! - 1);
      expect(belowModulus(lowered, ours.publicKeyPem)).toBe(true);
      expect({ at, code: codeOf({ encryptedData: lowered.toString('base64') }) }).toEqual({
        at,
        code: ErrorCodes.CALLBACK_JSON_INVALID,
      });
    }
    // A block below our modulus decrypts (implicit rejection) to garbage that fails as JSON. A block at or above the
    // modulus is refused by OpenSSL before any padding is looked at (public information, no oracle): DECRYPT_FAILED.
    const foreign = Buffer.from(enc(payin, stranger.publicKeyPem).encryptedData, 'base64');
    foreign[0] = 0; // below 2^2040, and a 2048-bit modulus is at least 2^2047
    expect(codeOf({ encryptedData: foreign.toString('base64') })).toBe(ErrorCodes.CALLBACK_JSON_INVALID);
    foreign.fill(0xff, 0, 256); // 2^2048 - 1: above every 2048-bit modulus (one 0xff byte is not, when the modulus starts 0xff)
    expect(codeOf({ encryptedData: foreign.toString('base64') })).toBe(ErrorCodes.CALLBACK_DECRYPT_FAILED);
    for (let i = 0; i < 5; i++) {
      const body = enc(payin, generateKeyPair().publicKeyPem);
      const block = Buffer.from(body.encryptedData, 'base64');
      const expected = belowModulus(block, ours.publicKeyPem)
        ? ErrorCodes.CALLBACK_JSON_INVALID
        : ErrorCodes.CALLBACK_DECRYPT_FAILED;
      expect(codeOf(body)).toBe(expected);
    }
  });

  it('refuses plaintext that is not a JSON object', () => {
    for (const text of ['hello', '[1,2]', '"str"', '{"OrderNo":"P1",', '\u00ff\u00fe']) {
      expect(codeOf(enc(text))).toBe(ErrorCodes.CALLBACK_JSON_INVALID);
    }
    expect(codeOf({ encryptedData: encryptRecord('{}', ours.publicKeyPem).slice(0) })).toBe(
      ErrorCodes.CALLBACK_SCHEMA_INVALID,
    );
  });

  it('refuses a missing field, a wrong type, a bad time and ambiguous or unsafe values', () => {
    const { Quantity: _q, ...noQuantity } = payin;
    const cases: Record<string, unknown>[] = [
      noQuantity,
      { ...payin, Quantity: '12.5' },
      { ...payin, OrderNo: 12345 },
      { ...payin, MerchantNo: 100001 },
      { ...payin, OrderState: 6.5 },
      { ...payin, OrderState: '6' },
      { ...payin, PayTime: null },
      { ...payin, PayTime: '2024-02-30T08:00:00' },
      { ...payin, PayTime: '2024-05-01T08:00:00+08:00' },
      { ...payin, OrderNo: 'P1:x' },
      { ...payin, FiatCurrency: -1 },
      { ...payin, state: 4 },
    ];
    for (const record of cases) expect(codeOf(enc(record))).toBe(ErrorCodes.CALLBACK_SCHEMA_INVALID);
    try {
      decodeCallback(enc(noQuantity), opts);
    } catch (e) {
      expect((e as AppError).details).toEqual({ issues: [{ field: 'quantity', problem: 'missing' }] });
    }
    // Names that differ only in case would make "which one counts" ambiguous.
    expect(codeOf(enc(JSON.stringify(payin).replace('}', ',"orderno":"P2"}')))).toBe(
      ErrorCodes.CALLBACK_SCHEMA_INVALID,
    );
  });

  it('refuses a state the spec does not define for the kind', () => {
    expect(codeOf(enc({ ...payin, OrderState: 4 }))).toBe(ErrorCodes.CALLBACK_STATE_INVALID);
    expect(codeOf(enc({ OrderNo: 'W1', MerchantNo: 'M100001', MerchantOrderNo: 'p', PayTime: null, state: 6 }))).toBe(
      ErrorCodes.CALLBACK_STATE_INVALID,
    );
  });

  it("refuses another merchant's record and a record of the other kind than the route expects", () => {
    expect(codeOf(enc({ ...payin, MerchantNo: 'M999' }))).toBe(ErrorCodes.CALLBACK_MERCHANT_MISMATCH);
    expect(codeOf(enc(payin), { ...opts, expectedKind: 'payout' })).toBe(ErrorCodes.CALLBACK_KIND_MISMATCH);
    expect(codeOf(enc(payin), { ...opts, expectedKind: 'payin' })).toBe('accepted');
  });

  it('error messages and details never carry the ciphertext or decrypted values other than ids', () => {
    const bodies = [
      enc({ ...payin, MerchantOrderNo: 'secret-order-77', Quantity: 'oops' }),
      enc('{"MerchantOrderNo":"secret-order-77"'),
    ];
    for (const body of bodies) {
      try {
        decodeCallback(body, opts);
        expect.unreachable();
      } catch (e) {
        const text = `${(e as Error).message} ${JSON.stringify((e as AppError).details)}`;
        expect(text).not.toContain('secret-order-77');
        expect(text).not.toContain(body.encryptedData.slice(0, 20));
      }
    }
  });

  it('no random body makes the codec throw anything but an AppError (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 600 }), fc.boolean(), (bytes, asText) => {
        const encryptedData = asText ? Buffer.from(bytes).toString('latin1') : Buffer.from(bytes).toString('base64');
        const code = codeOf({ encryptedData });
        return code !== 'accepted';
      }),
      { numRuns: 200 },
    );
  });
});
