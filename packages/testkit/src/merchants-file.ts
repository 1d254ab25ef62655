import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** One entry of a MERCHANTS_FILE (docs/merchants.md); `privateKeyFiles` defaults to one path nobody reads. */
export interface MerchantEntry {
  ref: string;
  merchantNo: string;
  privateKeyFiles?: string[];
  platformBaseUrl?: string;
  getOrderRps?: number;
  weight?: number;
  legacyRoutes?: boolean;
}

/** A MERCHANTS_FILE written to a folder of its own; `remove()` deletes both. */
export function writeMerchantsFile(entries: readonly MerchantEntry[]): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'mcb-merchants-'));
  const path = join(dir, 'merchants.json');
  const merchants = entries.map((e) => ({ privateKeyFiles: [join(dir, `${e.ref}.pem`)], ...e }));
  writeFileSync(path, JSON.stringify({ merchants }, null, 2));
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
