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

describe('callback codec refuses bad input with a CALLBACK_* code', () => {
  it('refuses a body that is not an object with a string encryptedData', () => {
    for (const body of [null, 'x', [], {}, { encryptedData: 5 }, { EncryptedData: 'AAAA' }]) {
      expect(codeOf(body)).toBe(ErrorCodes.CALLBACK_BAD_REQUEST);
    }
  });

  it('refuses non-strict Base64: foreign characters, whitespace, missing padding, non-canonical bits, empty', () => {
    const good = enc(payin).encryptedData;
    for (const bad of ['', `${good.slice(0, 10)}*${good.slice(11)}`, `${good.slice(0, 76)}\n${good.slice(76)}`, good.replace(/=+$/, '') + 'A', 'QR==']) {
      expect(codeOf({ encryptedData: bad })).toBe(ErrorCodes.CALLBACK_BASE64_INVALID);
    }
    expect(codeOf({ encryptedData: good.replace(/\+/g, '-').replace(/\//g, '_') })).not.toBe('accepted');
  });

  it('refuses a ciphertext that is not a whole number of key-size blocks', () => {
    const ct = Buffer.from(enc(payin).encryptedData, 'base64');
    expect(codeOf({ encryptedData: ct.subarray(0, 255).toString('base64') })).toBe(ErrorCodes.CALLBACK_CIPHERTEXT_LENGTH);
    expect(codeOf({ encryptedData: Buffer.concat([ct, Buffer.alloc(3)]).toString('base64') })).toBe(ErrorCodes.CALLBACK_CIPHERTEXT_LENGTH);
  });

  it('a tampered ciphertext or a wrong key yields garbage that fails as JSON, never a decryption exception', () => {
    const ct = Buffer.from(enc(payin).encryptedData, 'base64');
    for (const at of [0, 1, 100, 255]) {
      const t = Buffer.from(ct);
      t[at] = (t[at] ?? 0) ^ 0x01;
      expect(codeOf({ encryptedData: t.toString('base64') })).toBe(ErrorCodes.CALLBACK_JSON_INVALID);
    }
    // A block below our modulus decrypts (implicit rejection) to garbage that fails as JSON. A block at or above the
    // modulus is refused by OpenSSL before any padding is looked at (public information, no oracle): DECRYPT_FAILED.
    const foreign = Buffer.from(enc(payin, stranger.publicKeyPem).encryptedData, 'base64');
    foreign[0] = 0;
    expect(codeOf({ encryptedData: foreign.toString('base64') })).toBe(ErrorCodes.CALLBACK_JSON_INVALID);
    foreign.fill(0xff, 0, 1);
    expect(codeOf({ encryptedData: foreign.toString('base64') })).toBe(ErrorCodes.CALLBACK_DECRYPT_FAILED);
    for (let i = 0; i < 5; i++) {
      expect([ErrorCodes.CALLBACK_JSON_INVALID, ErrorCodes.CALLBACK_DECRYPT_FAILED]).toContain(codeOf(enc(payin, generateKeyPair().publicKeyPem)));
    }
  });

  it('refuses plaintext that is not a JSON object', () => {
    for (const text of ['hello', '[1,2]', '"str"', '{"OrderNo":"P1",', '\u00ff\u00fe']) {
      expect(codeOf(enc(text))).toBe(ErrorCodes.CALLBACK_JSON_INVALID);
    }
    expect(codeOf({ encryptedData: encryptRecord('{}', ours.publicKeyPem).slice(0) })).toBe(ErrorCodes.CALLBACK_SCHEMA_INVALID);
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
    expect(codeOf(enc(JSON.stringify(payin).replace('}', ',"orderno":"P2"}')))).toBe(ErrorCodes.CALLBACK_SCHEMA_INVALID);
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
    const bodies = [enc({ ...payin, MerchantOrderNo: 'secret-order-77', Quantity: 'oops' }), enc('{"MerchantOrderNo":"secret-order-77"')];
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
