import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { generateKeyPair } from '@mcb/core/callback';

export const summary = 'generate a new RSA key pair for callbacks: keys generate [--bits 2048] [--out DIR] [--force]';

const USAGE = `usage: pnpm cli keys generate [--bits 2048] [--out DIR] [--name merchant] [--force]

Writes, in DIR (default: current directory):
  <name>-private.pem      our PKCS#8 private key (mode 0600): add it FIRST to MERCHANT_PRIVATE_KEY_FILE
  <name>-public.pem       the public key (SPKI PEM)
  <name>-public.b64.txt   the public key as one line of Base64 DER: the form uploaded to the platform's console
Rotation: MERCHANT_PRIVATE_KEY_FILE=new-private.pem,old-private.pem until the platform only uses the new key.`;

/** `pnpm cli keys generate`: a new RSA key pair; never prints the private key. */
export async function run(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'generate') {
    console.error(USAGE);
    return sub === undefined || sub === '--help' || sub === '-h' ? 0 : 2;
  }
  let values;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        bits: { type: 'string', default: '2048' },
        out: { type: 'string', default: '.' },
        name: { type: 'string', default: 'merchant' },
        force: { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (e) {
    console.error(`${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const bits = Number(values.bits);
  if (!/^[a-zA-Z0-9._-]+$/.test(values.name)) {
    console.error('--name: letters, digits, ".", "_" and "-" only');
    return 2;
  }
  const dir = resolve(values.out);
  const files = {
    privateKey: join(dir, `${values.name}-private.pem`),
    publicPem: join(dir, `${values.name}-public.pem`),
    publicB64: join(dir, `${values.name}-public.b64.txt`),
  };
  const existing = Object.values(files).filter((f) => existsSync(f));
  if (existing.length > 0 && !values.force) {
    console.error(
      `refusing to overwrite ${existing.join(', ')} (pass --force to replace; an overwritten private key is gone for good)`,
    );
    return 1;
  }
  let pair;
  try {
    pair = generateKeyPair(bits);
  } catch (e) {
    console.error(`--bits: ${(e as Error).message}`);
    return 2;
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(files.privateKey, pair.privateKeyPem, { mode: 0o600 });
  writeFileSync(files.publicPem, pair.publicKeyPem, { mode: 0o644 });
  writeFileSync(files.publicB64, `${pair.publicKeyBase64}\n`, { mode: 0o644 });
  console.log(
    [
      `RSA ${bits}-bit key pair written:`,
      `  private (keep secret, mode 0600): ${files.privateKey}`,
      `  public PEM:                       ${files.publicPem}`,
      `  public Base64 (upload this):      ${files.publicB64}`,
      '',
      'Public key to upload to the platform console:',
      pair.publicKeyBase64,
    ].join('\n'),
  );
  return 0;
}
