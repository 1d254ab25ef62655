/**
 * Several merchant numbers on the local stack (`pnpm demo --merchants N`, `pnpm dev --merchants N`): each its own
 * key pair (kept in the keys folder, like the single merchant's) and its own sandbox account, listed in a
 * MERCHANTS_FILE written next to the keys (docs/merchants.md). The first keeps the single merchant's number and the
 * legacy routes, so `pnpm sandbox trigger` without `--merchant` still reaches it.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DEFAULT_MERCHANT_REF, MAX_MERCHANTS } from '@mcb/core/config';
import { ensureKeyPair, type LocalSettings } from './local-env.ts';

/** The most merchants the local stack runs (the deployment's own bound is {@link MAX_MERCHANTS}). */
export const MAX_LOCAL_MERCHANTS = Math.min(8, MAX_MERCHANTS);

/** One merchant of the local stack. */
export interface LocalMerchant {
  /** `m1`, `m2`, ...; `default` when the stack runs one merchant without MERCHANTS_FILE. */
  ref: string;
  merchantNo: string;
  privateKeyFile: string;
}

/** The `--merchants` value: a whole number from 1 to {@link MAX_LOCAL_MERCHANTS}; throws a message naming the flag. */
export function parseMerchantCount(raw: string): number {
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || n < 1 || n > MAX_LOCAL_MERCHANTS)
    throw new Error(`--merchants: expected a whole number from 1 to ${MAX_LOCAL_MERCHANTS}`);
  return n;
}

/** The i-th merchant number after `first`: its trailing digits counted up (M100001, M100002), else `-i` added. */
function nthMerchantNo(first: string, i: number): string {
  if (i === 0) return first;
  const m = /^(.*?)(\d+)$/.exec(first);
  if (!m) return `${first}-${i + 1}`;
  const next = String(BigInt(m[2]!) + BigInt(i));
  return `${m[1]}${next.padStart(m[2]!.length, '0')}`;
}

/** The stack's merchants: one `default` (MERCHANT_NO, as always), or `count` of them for MERCHANTS_FILE. */
export function localMerchants(settings: LocalSettings, count: number): LocalMerchant[] {
  if (count <= 1)
    return [{ ref: DEFAULT_MERCHANT_REF, merchantNo: settings.merchantNo, privateKeyFile: settings.privateKeyFile }];
  const keysDir = dirname(settings.consoleTokenFile);
  return Array.from({ length: count }, (_, i) => ({
    ref: `m${i + 1}`,
    merchantNo: nthMerchantNo(settings.merchantNo, i),
    privateKeyFile: join(keysDir, `merchant-m${i + 1}-private.pem`),
  }));
}

/**
 * Each merchant's key pair (generated when missing) and the MERCHANTS_FILE naming them, written in the keys folder;
 * returns the file's path and the refs whose keys were generated.
 */
export function writeLocalMerchantsFile(
  settings: LocalSettings,
  merchants: readonly LocalMerchant[],
): { file: string; generated: string[] } {
  const generated = merchants.filter((m) => ensureKeyPair(m.privateKeyFile)).map((m) => m.ref);
  const file = join(dirname(settings.consoleTokenFile), 'merchants.json');
  const entries = merchants.map((m, i) => ({
    ref: m.ref,
    merchantNo: m.merchantNo,
    privateKeyFiles: [m.privateKeyFile],
    ...(i === 0 ? { legacyRoutes: true } : {}),
  }));
  writeFileSync(file, `${JSON.stringify({ merchants: entries }, null, 2)}\n`, { mode: 0o644 });
  return { file, generated };
}
