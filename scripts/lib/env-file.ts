/**
 * The local `.env` file: `.env` at the repository root, or the file `MCB_ENV_FILE` names (`none`: no file at all,
 * as the tests that start a local stack ask). Read by scripts/load-env.ts; written once by `pnpm dev`/`pnpm demo`.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export function localEnvFile(env: Record<string, string | undefined> = process.env): string | undefined {
  const chosen = env.MCB_ENV_FILE?.trim();
  if (chosen === 'none') return undefined;
  return chosen ? resolve(chosen) : resolve(ROOT, '.env');
}

/**
 * `NAME=value` lines as Node's parser (`util.parseEnv`) reads them back: a value with spaces, quotes or `#` is put
 * in the first of `'`, `"`, `` ` `` it does not contain (that parser has no escapes); a value that needs all three,
 * or holds a line break, is refused.
 */
export function renderEnvFile(header: string[], values: Record<string, string>): string {
  const quote = (name: string, v: string) => {
    if (/^[\w@%+=:,./-]*$/.test(v)) return v;
    const q = ["'", '"', '`'].find((c) => !v.includes(c));
    if (!q || /[\r\n]/.test(v)) throw new Error(`${name}: cannot be written to a .env file (line break, or all three quote characters)`);
    return `${q}${v}${q}`;
  };
  return [...header.map((l) => `# ${l}`), '', ...Object.entries(values).map(([k, v]) => `${k}=${quote(k, v)}`), ''].join('\n');
}

/**
 * Write `values` to the local `.env` when there is none; never overwrites a user's file. Mode 0600: it holds the
 * console token. Returns the file written, or undefined when one existed (or files are off).
 */
export function writeLocalEnvFileOnce(header: string[], values: Record<string, string>, env = process.env): string | undefined {
  const file = localEnvFile(env);
  if (!file || existsSync(file)) return undefined;
  try {
    writeFileSync(file, renderEnvFile(header, values), { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
    throw e;
  }
  return file;
}
