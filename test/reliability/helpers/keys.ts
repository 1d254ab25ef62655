import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair, loadKeyRing, type KeyRing } from '@mcb/core/callback';
import { onProcessExit } from '@mcb/testkit';

/** A fresh merchant key pair, its private key in a 0600 file for ingest processes, removed by `remove()`. */
export interface TestKeys {
  privateKeyFile: string;
  privateKeyPem: string;
  publicKeyPem: string;
  keyRing: KeyRing;
  remove(): void;
}

export function createTestKeys(): TestKeys {
  const pair = generateKeyPair(2048);
  const dir = mkdtempSync(join(tmpdir(), 'mcb-rel-keys-'));
  const privateKeyFile = join(dir, 'merchant-private.pem');
  writeFileSync(privateKeyFile, pair.privateKeyPem, { mode: 0o600 });
  const remove = () => rmSync(dir, { recursive: true, force: true });
  const unregister = onProcessExit(remove);
  return {
    privateKeyFile,
    privateKeyPem: pair.privateKeyPem,
    publicKeyPem: pair.publicKeyPem,
    keyRing: loadKeyRing([pair.privateKeyPem]),
    remove: () => (remove(), unregister()),
  };
}
