import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv, promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { configVariables } from '@mcb/core/config';
import { useTestEnv } from '@mcb/testkit';
import { ENV_EXAMPLE, renderEnvExample } from '../scripts/env-example.ts';
import { renderEnvFile, writeLocalEnvFileOnce } from '../scripts/lib/env-file.ts';

// One local configuration: `.env.example` is generated from the config schema (and fails here when they drift),
// every pnpm command reads `.env` through scripts/load-env.ts, and the real environment wins over the file.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const env = useTestEnv();
const dir = mkdtempSync(join(tmpdir(), 'mcb-env-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (args: string[], extraEnv: Record<string, string>) =>
  promisify(execFile)(process.execPath, ['--import', './scripts/load-env.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...extraEnv },
    timeout: 20_000,
  }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }),
  );

describe('.env.example', () => {
  it('is what `pnpm env:example` generates from the config schema now (run it after changing the schema)', () => {
    expect(readFileSync(ENV_EXAMPLE, 'utf8')).toBe(renderEnvExample());
  });

  it('lists exactly the schema variables, each with its default', () => {
    const listed = [...readFileSync(ENV_EXAMPLE, 'utf8').matchAll(/^# ([A-Z][A-Z0-9_]*)=(.*)$/gm)].map((m) => [m[1], m[2]]);
    expect(listed.map(([name]) => name)).toEqual(configVariables().map((v) => v.name));
    expect(Object.fromEntries(listed)).toMatchObject({ INGEST_PORT: '8080', INGEST_REQUEST_TIMEOUT: '10s', MERCHANT_NO: '' });
  });
});

describe('the local .env file', () => {
  it('fills in what the environment does not set; a variable set in the environment wins', async () => {
    const file = join(dir, 'precedence.env');
    writeFileSync(file, 'MERCHANT_NO=FROM_FILE\nQUEUE_PREFIX=from-file\n');
    const r = await run(['-e', 'console.log(JSON.stringify([process.env.MERCHANT_NO, process.env.QUEUE_PREFIX]))'], {
      MCB_ENV_FILE: file,
      QUEUE_PREFIX: 'from-env',
    });
    expect(JSON.parse(r.stdout)).toEqual(['FROM_FILE', 'from-env']);
  });

  it('is what `pnpm cli` reads its settings from: without it the command names the unset variables, with it it reaches the platform', async () => {
    const args = ['apps/console/src/cli/main.ts', 'methods', '--currency', 'INR'];
    const without = await run(args, { MCB_ENV_FILE: 'none' });
    expect(without.code).toBe(1);
    expect(without.stderr).toMatch(/MERCHANT_NO.*unset/s);

    const file = join(dir, 'cli.env');
    writeFileSync(file, `MERCHANT_NO=M1\nPLATFORM_BASE_URL=http://127.0.0.1:1\nPLATFORM_ALLOW_HTTP=true\nDATABASE_URL=${env.databaseUrl}\nPLATFORM_TIMEOUT=2s\n`);
    const withFile = await run(args, { MCB_ENV_FILE: file });
    expect(withFile.code).toBe(1);
    expect(withFile.stderr).not.toMatch(/invalid configuration/);
    expect(withFile.stderr).toMatch(/CATALOG_UNAVAILABLE|PLATFORM_UNREACHABLE/);
  });

  it('is written once by the local stack (mode 0600, values read back as written) and never overwritten', () => {
    const file = join(dir, 'written.env');
    const values = { MERCHANT_NO: 'M100001', CONSOLE_TOKEN: 'a "quoted" token #1 with spaces', PLATFORM_BASE_URL: 'http://127.0.0.1:8090' };
    expect(writeLocalEnvFileOnce(['header'], values, { MCB_ENV_FILE: file })).toBe(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(parseEnv(readFileSync(file, 'utf8'))).toEqual(values);
    expect(writeLocalEnvFileOnce(['header'], { MERCHANT_NO: 'OTHER' }, { MCB_ENV_FILE: file })).toBeUndefined();
    expect(parseEnv(readFileSync(file, 'utf8')).MERCHANT_NO).toBe('M100001');
    expect(writeLocalEnvFileOnce(['header'], values, { MCB_ENV_FILE: 'none' })).toBeUndefined();
  });

  it('refuses a value its parser could not read back (a line break, or all three quote characters)', () => {
    expect(() => renderEnvFile([], { CONSOLE_TOKEN: 'a\nb' })).toThrow(/CONSOLE_TOKEN: cannot be written to a .env file/);
    expect(() => renderEnvFile([], { X: `'"\` x` })).toThrow(/X: cannot be written/);
    expect(() => writeLocalEnvFileOnce([], { X: 'a\nb' }, { MCB_ENV_FILE: join(dir, 'refused.env') })).toThrow(/X: cannot be written/);
    expect(existsSync(join(dir, 'refused.env'))).toBe(false);
  });
});
