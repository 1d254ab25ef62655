import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv, promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeyPair } from '@mcb/core/callback';
import { configVariables, loadConfig } from '@mcb/core/config';
import { redisTargetOf } from '@mcb/core/redis';
import { startOwnRedis, useTestEnv } from '@mcb/testkit';
import { ENV_EXAMPLE, renderEnvExample } from '../scripts/env-example.ts';
import { GENERATED_MARKER, renderEnvFile, writeLocalEnvFile } from '../scripts/lib/env-file.ts';

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
    (e: { code?: number; stdout?: string; stderr?: string }) => ({
      code: e.code ?? -1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? '',
    }),
  );

describe('.env.example', () => {
  it('is what `pnpm env:example` generates from the config schema now (run it after changing the schema)', () => {
    expect(readFileSync(ENV_EXAMPLE, 'utf8')).toBe(renderEnvExample());
  });

  it('lists exactly the schema variables, each with its default', () => {
    const listed = [...readFileSync(ENV_EXAMPLE, 'utf8').matchAll(/^# ([A-Z][A-Z0-9_]*)=(.*)$/gm)].map((m) => [
      m[1],
      m[2],
    ]);
    expect(listed.map(([name]) => name)).toEqual(configVariables().map((v) => v.name));
    expect(Object.fromEntries(listed)).toMatchObject({
      INGEST_PORT: '8080',
      INGEST_REQUEST_TIMEOUT: '10s',
      MERCHANT_NO: '',
    });
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
    writeFileSync(
      file,
      `MERCHANT_NO=M1\nPLATFORM_BASE_URL=http://127.0.0.1:1\nPLATFORM_ALLOW_HTTP=true\nDATABASE_URL=${env.databaseUrl}\nPLATFORM_TIMEOUT=2s\n`,
    );
    const withFile = await run(args, { MCB_ENV_FILE: file });
    expect(withFile.code).toBe(1);
    expect(withFile.stderr).not.toMatch(/invalid configuration/);
    expect(withFile.stderr).toMatch(/CATALOG_UNAVAILABLE|PLATFORM_UNREACHABLE/);
  });

  it("is written by the local stack (mode 0600, values read back as written), rewritten while it is the stack's own, never once a user made it theirs", () => {
    const file = join(dir, 'written.env');
    const values = {
      MERCHANT_NO: 'M100001',
      CONSOLE_TOKEN: 'a "quoted" token #1 with spaces',
      PLATFORM_BASE_URL: 'http://127.0.0.1:8090',
    };
    expect(writeLocalEnvFile(['header'], values, { MCB_ENV_FILE: file })).toBe(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').split('\n')[0]).toBe(GENERATED_MARKER);
    expect(parseEnv(readFileSync(file, 'utf8'))).toEqual(values);
    // The next run of the stack (pnpm dev after pnpm demo) rewrites its own file...
    expect(writeLocalEnvFile(['header'], { MERCHANT_NO: 'NEXT' }, { MCB_ENV_FILE: file })).toBe(file);
    expect(parseEnv(readFileSync(file, 'utf8')).MERCHANT_NO).toBe('NEXT');
    // ...but not once the user removed the marker line: the file is theirs.
    writeFileSync(file, readFileSync(file, 'utf8').split('\n').slice(1).join('\n'));
    expect(writeLocalEnvFile(['header'], { MERCHANT_NO: 'OTHER' }, { MCB_ENV_FILE: file })).toBeUndefined();
    expect(parseEnv(readFileSync(file, 'utf8')).MERCHANT_NO).toBe('NEXT');
    expect(writeLocalEnvFile(['header'], values, { MCB_ENV_FILE: 'none' })).toBeUndefined();
  });

  it('refuses a value its parser could not read back (a line break, or all three quote characters)', () => {
    expect(() => renderEnvFile([], { CONSOLE_TOKEN: 'a\nb' })).toThrow(
      /CONSOLE_TOKEN: cannot be written to a .env file/,
    );
    expect(() => renderEnvFile([], { X: `'"\` x` })).toThrow(/X: cannot be written/);
    expect(() => writeLocalEnvFile([], { X: 'a\nb' }, { MCB_ENV_FILE: join(dir, 'refused.env') })).toThrow(
      /X: cannot be written/,
    );
    expect(existsSync(join(dir, 'refused.env'))).toBe(false);
  });
});

describe('local settings never loosen a production start in the same checkout', () => {
  const printEnv = (names: string[]) => [
    '-e',
    `console.log(JSON.stringify([${names.map((n) => `process.env.${n} ?? null`).join(', ')}]))`,
  ];

  it('a .env never sets a loosening (INGEST_ALLOW_VOLATILE_REDIS, PLATFORM_ALLOW_HTTP), and says it ignored one', async () => {
    const file = join(dir, 'old-dev.env');
    writeFileSync(file, 'MERCHANT_NO=M1\nINGEST_ALLOW_VOLATILE_REDIS=true\nPLATFORM_ALLOW_HTTP=true\n');
    const r = await run(printEnv(['MERCHANT_NO', 'INGEST_ALLOW_VOLATILE_REDIS', 'PLATFORM_ALLOW_HTTP']), {
      MCB_ENV_FILE: file,
    });
    expect(JSON.parse(r.stdout)).toEqual(['M1', null, null]);
    expect(r.stderr).toMatch(
      /INGEST_ALLOW_VOLATILE_REDIS=true ignored: a setting that loosens a check is read from the environment only/,
    );
    // Set in the environment, it holds (as dev and demo set it for the apps they start).
    const env2 = await run(printEnv(['PLATFORM_ALLOW_HTTP']), { MCB_ENV_FILE: file, PLATFORM_ALLOW_HTTP: 'true' });
    expect(JSON.parse(env2.stdout)).toEqual(['true']);
  });

  it('pnpm start:ingest next to a .env that once allowed a volatile Redis still refuses one', async () => {
    const volatile = await startOwnRedis(['--appendonly', 'no']);
    try {
      const keyFile = join(dir, 'merchant-private.pem');
      writeFileSync(keyFile, generateKeyPair(2048).privateKeyPem, { mode: 0o600 });
      const file = join(dir, 'dev-wrote.env');
      writeFileSync(
        file,
        `MERCHANT_NO=M1\nMERCHANT_PRIVATE_KEY_FILE=${keyFile}\nINGEST_ALLOW_VOLATILE_REDIS=true\nINGEST_PORT=0\nINGEST_METRICS_PORT=0\n`,
      );
      const r = await run(['apps/ingest/src/main.ts'], {
        MCB_ENV_FILE: file,
        REDIS_URL: volatile.url,
        LOG_FORMAT: 'json',
      });
      expect(r.code).toBe(1);
      expect(r.stdout + r.stderr).toMatch(/REDIS_NOT_DURABLE/);
    } finally {
      await volatile.destroy();
    }
  });

  it('pnpm start:worker next to the .env of a local stack refuses its http platform', async () => {
    const file = join(dir, 'stack.env');
    writeFileSync(
      file,
      `${GENERATED_MARKER}\nMERCHANT_NO=M1\nPLATFORM_BASE_URL=http://127.0.0.1:8090\nPLATFORM_ALLOW_HTTP=true\n`,
    );
    const r = await run(['apps/worker/src/main.ts'], { MCB_ENV_FILE: file, LOG_FORMAT: 'json' });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/PLATFORM_BASE_URL: expected an https URL/);
  });

  it("an operator's command may reach a platform on this machine over http; worker and console never without PLATFORM_ALLOW_HTTP", () => {
    const base = { MERCHANT_NO: 'M1', CONSOLE_TOKEN: 'a-console-token-of-16+' };
    expect(loadConfig({ ...base, PLATFORM_BASE_URL: 'http://127.0.0.1:8090' }, 'cli').PLATFORM_BASE_URL).toBe(
      'http://127.0.0.1:8090',
    );
    expect(() => loadConfig({ ...base, PLATFORM_BASE_URL: 'http://platform.example' }, 'cli')).toThrow(
      /expected an https URL/,
    );
    for (const role of ['worker', 'console'] as const) {
      expect(() => loadConfig({ ...base, PLATFORM_BASE_URL: 'http://127.0.0.1:8090' }, role), role).toThrow(
        /expected an https URL/,
      );
    }
  });

  it("a Redis topology chosen in the environment replaces the file's instead of clashing with it", async () => {
    const file = join(dir, 'topology.env');
    writeFileSync(file, 'REDIS_URL=redis://127.0.0.1:6379\nMERCHANT_NO=M1\n');
    const names = ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'QUEUE_PREFIX', 'MERCHANT_NO'];
    const r = await run(printEnv(names), {
      MCB_ENV_FILE: file,
      REDIS_CLUSTER_NODES: 'node-1:6379,node-2:6379',
      QUEUE_PREFIX: '{mcb}',
    });
    const seen = Object.fromEntries(
      names.map((n, i) => [n, (JSON.parse(r.stdout) as (string | null)[])[i] ?? undefined]),
    );
    expect(seen.REDIS_URL).toBeUndefined();
    expect(seen.MERCHANT_NO).toBe('M1');
    expect(redisTargetOf(loadConfig(seen, 'cli'))).toEqual({
      kind: 'cluster',
      nodes: [
        { host: 'node-1', port: 6379 },
        { host: 'node-2', port: 6379 },
      ],
    });
  });
});
