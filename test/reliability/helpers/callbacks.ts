/** Callback bodies for reliability tests: genuine, near-valid and raw-byte records encrypted as the platform does. */
import { encryptRecord } from '@mcb/core/callback';
import { PayinState } from '@mcb/core/spec';

let seq = 0;

/** A valid pay-in record for `merchantNo` with a fresh OrderNo. */
export function payinRecord(merchantNo: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  seq++;
  return {
    OrderNo: `PIREL${process.pid}${Date.now().toString(36)}${seq}`,
    MerchantNo: merchantNo,
    MerchantOrderNo: `MREL${seq}`,
    PayTime: '2026-01-02T03:04:05',
    OrderState: PayinState.Released,
    Quantity: 12.5,
    FiatCurrency: 1000.1,
    ...overrides,
  };
}

/** The request body carrying `record` (an object, or JSON text kept as is) encrypted with the merchant's key. */
export function callbackBody(record: object | string, publicKeyPem: string): string {
  return JSON.stringify({ encryptedData: encryptRecord(record, publicKeyPem) });
}

/** Arbitrary bytes encrypted in PKCS#1 v1.5 blocks, as the platform would encrypt a record (for wrong encodings). */
export function encryptBytes(bytes: Buffer, publicKeyPem: string): string {
  return encryptRecord(bytes, publicKeyPem);
}
