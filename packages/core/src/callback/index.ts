/**
 * The callback codec: what the platform sends (Base64 of RSA PKCS#1 v1.5 blocks of a JSON record) to the job
 * payload ingest enqueues, and the platform's side of it for the sandbox, tests and benchmarks.
 */
export { decodeStrictBase64 } from './base64.ts';
export {
  decodeCallback,
  decodeCallbackDetailed,
  MAX_CALLBACK_BLOCKS,
  type DecodeCallbackOptions,
  type DecodedCallback,
} from './decode.ts';
export { assertImplicitRejection } from './implicit-rejection.ts';
export { loadKeyRing, loadKeyRingFromFiles, type KeyRing, type RingKey } from './key-ring.ts';
export {
  decoyKeyRing,
  loadMerchantKeyRings,
  type MerchantKeyRings,
  type MerchantKeyRingsOptions,
} from './merchant-key-rings.ts';
export { generateKeyPair, parsePublicKey, type GeneratedKeyPair } from './keys.ts';
export { platformTimeToIso } from './pay-time.ts';
export { CALLBACK_STATES, parseRecord, type CallbackRecord } from './record.ts';
export {
  blockDecryptor,
  encryptRecord,
  PKCS1_OVERHEAD,
  prepareDecryption,
  type BlockDecrypt,
  type EncryptRecordOptions,
} from './rsa-blocks.ts';
export {
  formatPayTime,
  payinRecordJson,
  payoutRecordJson,
  type PayinRecordFields,
  type PayoutRecordFields,
} from './records.ts';
