import { constants, privateDecrypt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  decodeCallback,
  encryptRecord,
  generateKeyPair,
  loadKeyRing,
  decodeCallbackDetailed,
} from '@mcb/core/callback';
import { callbackJobSchema } from '@mcb/core/queue';

const current = generateKeyPair();
const previous = generateKeyPair();
const big = generateKeyPair(4096);
const ring = loadKeyRing([current.privateKeyPem, previous.privateKeyPem]);
const opts = { keyRing: ring, merchantNo: 'M100001', now: () => new Date('2024-05-01T00:00:00Z') };

const payinText = (extra = '') =>
  `{"orderno":"P20240501001","merchantno":"M100001","merchantorderno":"ord-1","paytime":"2024-05-01T08:30:00",` +
  `"orderstate":6,"quantity":12.345600,"fiatcurrency":100.10${extra}}`;
const payoutText = (state = 4, payTime = 'null') =>
  `{"OrderNo":"W77","MerchantNo":"M100001","MerchantOrderNo":"po-9","PayTime":${payTime},"state":${state}}`;

function blocksOf(b64: string, bits: number): number {
  return Buffer.from(b64, 'base64').length / (bits / 8);
}

describe('callback codec decodes valid records', () => {
  it('one-block pay-in with lower-case names keeps amounts as exact decimal text and PayTime as UTC', () => {
    const enc = encryptRecord(payinText(), current.publicKeyPem);
    expect(blocksOf(enc, 2048)).toBe(1);
    const job = decodeCallback({ encryptedData: enc }, opts);
    expect(job).toEqual({
      kind: 'payin',
      orderNo: 'P20240501001',
      merchantNo: 'M100001',
      merchantOrderNo: 'ord-1',
      state: 6,
      payTime: '2024-05-01T00:30:00.000Z',
      quantity: '12.345600',
      fiatAmount: '100.10',
      receivedAt: '2024-05-01T00:00:00.000Z',
      source: 'callback',
    });
    expect(callbackJobSchema.parse(job).kind).toBe('payin');
  });

  it('three-block pay-in and three-block payout decode to the same record as one block', () => {
    const one = decodeCallback({ encryptedData: encryptRecord(payinText(), current.publicKeyPem) }, opts);
    const encIn = encryptRecord(payinText(), current.publicKeyPem, { minBlocks: 3 });
    expect(blocksOf(encIn, 2048)).toBe(3);
    expect(decodeCallback({ encryptedData: encIn }, opts)).toEqual(one);

    const encOut = encryptRecord(payoutText(5, '"2024-12-31T23:59:59"'), current.publicKeyPem, { minBlocks: 3 });
    expect(blocksOf(encOut, 2048)).toBe(3);
    expect(decodeCallback({ encryptedData: encOut }, { ...opts, expectedKind: 'payout' })).toMatchObject({
      kind: 'payout',
      orderNo: 'W77',
      state: 5,
      payTime: '2024-12-31T15:59:59.000Z',
    });
  });

  it('a long record is split into chunks of at most k-11 bytes, each one block', () => {
    const text = payinText(`,"note":"${'x'.repeat(600)}"`);
    const enc = encryptRecord(text, current.publicKeyPem);
    const ct = Buffer.from(enc, 'base64');
    expect(ct.length / 256).toBe(Math.ceil(Buffer.byteLength(text) / 245));
    const firstChunk = privateDecrypt(
      { key: current.privateKeyPem, padding: constants.RSA_PKCS1_PADDING },
      ct.subarray(0, 256),
    );
    expect(firstChunk.length).toBe(245);
    expect(decodeCallback({ encryptedData: enc }, opts)).toMatchObject({ fiatAmount: '100.10' });
  });

  it('a callback encrypted under the previous key of the ring still decodes, and says which key opened it', () => {
    const enc = encryptRecord(payoutText(), previous.publicKeyBase64);
    const d = decodeCallbackDetailed({ encryptedData: enc }, opts);
    expect(d.keyIndex).toBe(1);
    expect(d.job).toMatchObject({ kind: 'payout', orderNo: 'W77', state: 4, payTime: null });
  });

  it('a ring with keys of different sizes picks the key whose block size fits the ciphertext', () => {
    const mixed = loadKeyRing([current.privateKeyPem, big.privateKeyPem]);
    const enc = encryptRecord(payoutText(), big.publicKeyPem, { minBlocks: 2 });
    expect(decodeCallbackDetailed({ encryptedData: enc }, { ...opts, keyRing: mixed }).keyIndex).toBe(1);
  });

  it('exponent-form amounts are spelled out exactly, never through a float', () => {
    const text = payinText().replace('12.345600', '1.5e3').replace('100.10', '0.1000000000000000055511151231257827');
    const job = decodeCallback({ encryptedData: encryptRecord(text, current.publicKeyPem) }, opts);
    expect(job).toMatchObject({ quantity: '1500', fiatAmount: '0.1000000000000000055511151231257827' });
  });

  it('pay-in OrderState 3 (Success) is a state the spec defines and is accepted', () => {
    const enc = encryptRecord(payinText().replace('"orderstate":6', '"orderstate":3'), current.publicKeyPem);
    expect(decodeCallback({ encryptedData: enc }, opts).state).toBe(3);
  });

  it('any decimal amount and mixed-case field names round-trip exactly (property)', () => {
    const decimal = fc
      .tuple(fc.bigInt({ min: 0n, max: 10n ** 20n }), fc.option(fc.stringMatching(/^\d{1,12}$/), { nil: undefined }))
      .map(([i, f]) => (f === undefined ? `${i}` : `${i}.${f}`));
    const casing = fc.constantFrom(
      (s: string) => s,
      (s: string) => s.toLowerCase(),
      (s: string) => s.toUpperCase(),
    );
    fc.assert(
      fc.property(decimal, decimal, casing, (q, f, c) => {
        const text =
          `{"${c('OrderNo')}":"P1","${c('MerchantNo')}":"M100001","${c('MerchantOrderNo')}":"o1",` +
          `"${c('PayTime')}":"2024-01-01T00:00:00","${c('OrderState')}":6,"${c('Quantity')}":${q},"${c('FiatCurrency')}":${f}}`;
        const job = decodeCallback({ encryptedData: encryptRecord(text, current.publicKeyPem) }, opts);
        return job.kind === 'payin' && job.quantity === q && job.fiatAmount === f;
      }),
      { numRuns: 40 },
    );
  });
});
