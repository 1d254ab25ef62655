import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '@mcb/testkit';
import { startFakePlatform } from './helpers/fake-platform.ts';

const env = useTestEnv();
let platform: Awaited<ReturnType<typeof startFakePlatform>>;
const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));

beforeAll(async () => {
  platform = await startFakePlatform();
});
afterAll(async () => {
  await platform?.stop();
});

/** Run `pnpm cli ...` as a child process against the local platform and this file's database. */
function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      {
        env: {
          PATH: process.env.PATH,
          MERCHANT_NO: 'M100',
          PLATFORM_BASE_URL: platform.baseUrl,
          PLATFORM_ALLOW_HTTP: 'true',
          DATABASE_URL: env.databaseUrl,
        },
        timeout: 20_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('pnpm cli methods / payout validate', () => {
  it('prints the catalog as a table with fields, apiParams and banks', async () => {
    const r = await cli('methods');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^catalog fetched \S+ \(\d+s ago\)/);
    expect(r.stdout).toContain('PHP  ₱  2 decimals  3 methods');
    expect(r.stdout).toContain('method 1  Bank transfer  (bank)');
    expect(r.stdout).toMatch(/accountNo\s+bankAccount\s+yes\s+\^\[0-9\]\{10,16\}\$/);
    expect(r.stdout).toContain('banks (2, bankName must be one of these names): BDO Unibank (BDO), Metrobank (MBT)');
    expect(r.stdout).toMatch(/idPhoto\s+\(none: not via API\)\s+yes/);
    expect(r.stdout).toContain('JPY  ¥  0 decimals  0 methods');
  });

  it('narrows to --currency', async () => {
    const r = await cli('methods', '--currency', 'JPY', '--refresh');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('JPY');
    expect(r.stdout).not.toContain('PHP');
  });

  it('reports a platform error code and exits 1', async () => {
    platform.state.mode = { kind: 'code', code: 40017, message: 'illegal currency' };
    try {
      const r = await cli('methods', '--refresh');
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('the platform refused: code 40017: illegal currency');
    } finally {
      platform.state.mode = { kind: 'ok' };
    }
  });

  it('says a currency is not enabled, and exits 1, instead of printing an empty catalog', async () => {
    const r = await cli('methods', '--currency', 'XXX');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('CURRENCY_NOT_ENABLED: currency XXX is not enabled for this merchant');
    expect(r.stdout).toBe('');
    platform.state.mode = { kind: 'code', code: 40017, message: 'illegal currency' };
    try {
      const refused = await cli('methods', '--currency', 'KRW');
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        'CURRENCY_NOT_ENABLED: currency KRW is not enabled for this merchant (platform code 40017: illegal currency)',
      );
    } finally {
      platform.state.mode = { kind: 'ok' };
    }
  });

  it('says the platform does not know the merchant number (40010), and exits 1', async () => {
    platform.state.mode = { kind: 'code', code: 40010, message: 'merchant does not exist' };
    try {
      const r = await cli('methods', '--currency', 'PHP', '--refresh');
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/MERCHANT_UNKNOWN: the platform does not know this merchant number .*check MERCHANT_NO/);
    } finally {
      platform.state.mode = { kind: 'ok' };
    }
  });

  it('validates a payout: apiParams and exit 0 when valid, every problem and exit 1 when not', async () => {
    const ok = await cli(
      'payout',
      'validate',
      '--currency',
      'PHP',
      '--amount',
      '100.00',
      '--method',
      '1',
      '--param',
      'accountName=Juan Cruz',
      '--param',
      'accountNo=1234567890',
      '--param',
      'bank=BDO Unibank',
    );
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('bankAccount=1234567890');
    expect(ok.stdout).toContain('bankName=BDO Unibank');

    const bad = await cli(
      'payout',
      'validate',
      '--currency',
      'PHP',
      '--amount',
      '1.001',
      '--method',
      '1',
      '--param',
      'bank=Chase',
    );
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain('params.accountName: Account name (accountName) is required');
    expect(bad.stdout).toContain('amount: PHP allows at most 2 decimal places');
    expect(bad.stdout).toContain('params.bank: bankName Chase is not among');
  });

  it('exits 2 with usage for missing options or a malformed --param', async () => {
    expect((await cli('payout', 'validate', '--currency', 'PHP')).code).toBe(2);
    const r = await cli(
      'payout',
      'validate',
      '--currency',
      'PHP',
      '--amount',
      '1',
      '--method',
      '1',
      '--param',
      'novalue',
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--param expects key=value');
  });
});
