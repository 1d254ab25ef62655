import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { decodeCallback, encryptRecord, loadKeyRingFromFiles } from '@mcb/core/callback';
import { run } from '../src/cli/commands/keys.ts';

const dir = mkdtempSync(join(tmpdir(), 'mcb-keys-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('pnpm cli keys generate', () => {
  it('writes a private key (0600) ingest can load and a Base64 public key a platform can encrypt with', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      expect(await run(['generate', '--out', dir])).toBe(0);
      const printed = log.mock.calls.flat().join('\n');
      expect(printed).not.toContain('PRIVATE KEY');
    } finally {
      log.mockRestore();
    }
    const privatePath = join(dir, 'merchant-private.pem');
    expect(statSync(privatePath).mode & 0o777).toBe(0o600);
    const ring = loadKeyRingFromFiles([privatePath]);
    expect(ring.keys[0]?.bits).toBe(2048);
    const uploaded = readFileSync(join(dir, 'merchant-public.b64.txt'), 'utf8').trim();
    const record = { OrderNo: 'W1', MerchantNo: 'M1', MerchantOrderNo: 'm', PayTime: null, state: 4 };
    expect(
      decodeCallback({ encryptedData: encryptRecord(record, uploaded) }, { keyRing: ring, merchantNo: 'M1' }),
    ).toMatchObject({ orderNo: 'W1' });
  });

  it('refuses to overwrite an existing key, and refuses weak sizes and unknown subcommands', async () => {
    const err = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      expect(await run(['generate', '--out', dir])).toBe(1);
      expect(await run(['generate', '--out', join(dir, 'weak'), '--bits', '1024'])).toBe(2);
      expect(await run(['rotate'])).toBe(2);
    } finally {
      err.mockRestore();
    }
  });
});
