/**
 * Strict Base64 (RFC 4648 §4, standard alphabet, padded, no whitespace). Node's own decoder skips characters it
 * does not know, which would let two different bodies decode to the same ciphertext; we refuse instead.
 */
const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Decode strict Base64, or return `undefined` when `text` is empty, malformed or not canonical. */
export function decodeStrictBase64(text: string): Buffer | undefined {
  if (text.length === 0 || !STRICT_BASE64.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64');
  // Non-zero padding bits ("QQ==" vs "QR==") decode to the same bytes; only the canonical form is accepted.
  if (bytes.toString('base64') !== text) return undefined;
  return bytes;
}
