import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type Merchant } from '@mcb/core/config';
import { AppError } from '@mcb/core/errors';
import { merchantKeys } from '@mcb/core/queue';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'mcb-merchants-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A MERCHANTS_FILE holding `body` (an object is written as JSON). */
function merchantsFile(body: unknown): string {
  const file = join(dir, `merchants-${++files}.json`);
  writeFileSync(file, typeof body === 'string' ? body : JSON.stringify(body));
  return file;
}

const base = { PLATFORM_BASE_URL: 'https://platform.example', CONSOLE_TOKEN: 'a-console-token-of-length' };
const a = { ref: 'a', merchantNo: 'M-A', privateKeyFiles: ['keys/a.pem'] };
const b = { ref: 'b', merchantNo: 'M-B', privateKeyFiles: ['keys/b.pem', 'keys/b-old.pem'], weight: 2 };

/** The problems loadConfig names, one per line (none: []). */
function problemsOf(env: Record<string, string>, role: 'worker' | 'ingest' | 'console' = 'worker'): string[] {
  try {
    loadConfig(env, role);
    return [];
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    return (e as AppError).details?.problems as string[];
  }
}

describe('merchants', () => {
  it('without MERCHANTS_FILE, MERCHANT_NO and its key files are one merchant, default, on the legacy routes', () => {
    const config = loadConfig({ MERCHANT_NO: 'M1', MERCHANT_PRIVATE_KEY_FILE: 'k1.pem, k0.pem' }, 'ingest');
    expect(config.merchants).toEqual<Merchant[]>([
      {
        ref: 'default',
        merchantNo: 'M1',
        privateKeyFiles: ['k1.pem', 'k0.pem'],
        platformBaseUrl: undefined,
        getOrderRps: undefined,
        weight: 1,
        legacyRoutes: true,
      },
    ]);
    expect(Object.isFrozen(config.merchants)).toBe(true);
  });

  it('reads every entry of MERCHANTS_FILE with its defaults, and needs no MERCHANT_NO', () => {
    const file = merchantsFile({
      merchants: [
        { ...a, legacyRoutes: true, platformBaseUrl: 'https://a.example/' },
        { ...b, getOrderRps: 25 },
      ],
    });
    const config = loadConfig({ ...base, MERCHANTS_FILE: file }, 'worker');
    expect(config.merchants.map((m) => [m.ref, m.merchantNo, m.weight, m.legacyRoutes, m.getOrderRps])).toEqual([
      ['a', 'M-A', 1, true, undefined],
      ['b', 'M-B', 2, false, 25],
    ]);
    expect(config.merchants[0]!.platformBaseUrl).toBe('https://a.example');
    expect(config.merchants[1]!.privateKeyFiles).toEqual(['keys/b.pem', 'keys/b-old.pem']);
    expect(problemsOf({ MERCHANTS_FILE: file }, 'ingest')).toEqual([]);
  });

  it('refuses MERCHANTS_FILE together with MERCHANT_NO or MERCHANT_PRIVATE_KEY_FILE', () => {
    const file = merchantsFile({ merchants: [a] });
    const problems = problemsOf({ ...base, MERCHANTS_FILE: file, MERCHANT_NO: 'M1' });
    expect(problems).toEqual([
      expect.stringMatching(/^MERCHANTS_FILE: set together with MERCHANT_NO; .*unset MERCHANT_NO$/),
    ]);
  });

  it('names the entry and the field of each problem, all in one error', () => {
    const file = merchantsFile({
      merchants: [
        { ...a, legacyRoutes: true },
        { ...b, ref: 'B!' },
        { ref: 'c', merchantNo: 'M-A', privateKeyFiles: [] },
        { ...a, merchantNo: 'M-D', weight: 0, colour: 'red' },
        { ref: 'e', merchantNo: 'M-E', privateKeyFiles: ['e.pem'], platformBaseUrl: 'ftp://x' },
        { ref: 'f', merchantNo: 'M-F', privateKeyFiles: ['f.pem'], legacyRoutes: true },
      ],
    });
    const problems = problemsOf({ ...base, MERCHANTS_FILE: file });
    const where = `MERCHANTS_FILE (${file})`;
    expect(problems).toEqual(
      expect.arrayContaining([
        `${where}: merchants[1] ("B!").ref: expected 1 to 32 of a-z, 0-9 and -`,
        `${where}: merchants[2] ("c").privateKeyFiles: expected at least one PEM file`,
        `${where}: merchants[3] ("a").weight: expected 1 or more`,
        `${where}: merchants[3] ("a").colour: Unrecognized key: "colour"`,
        `${where}: merchants[4] ("e").platformBaseUrl: expected an http(s) URL`,
        `${where}: legacyRoutes: at most one merchant may take /callbacks (got "a", "f")`,
      ]),
    );
    expect(problems.filter((p) => p.includes('merchants[3]'))).toHaveLength(2);
  });

  it('refuses a ref or a merchant number used twice, naming both entries', () => {
    const file = merchantsFile({ merchants: [a, { ...b, ref: 'a' }, { ...b, ref: 'c', merchantNo: 'M-A' }] });
    expect(problemsOf({ ...base, MERCHANTS_FILE: file })).toEqual([
      `MERCHANTS_FILE (${file}): merchants[1] ("a").ref: the same as merchants[0]'s`,
      `MERCHANTS_FILE (${file}): merchants[2] ("c").merchantNo: the same as merchants[0]'s`,
    ]);
  });

  it('refuses an unreadable file, a file that is not JSON, an empty list and more than 64 merchants', () => {
    expect(problemsOf({ ...base, MERCHANTS_FILE: join(dir, 'missing.json') })).toEqual([
      `MERCHANTS_FILE: ${join(dir, 'missing.json')} cannot be read (ENOENT)`,
    ]);
    expect(problemsOf({ ...base, MERCHANTS_FILE: merchantsFile('{"merchants": [') })[0]).toMatch(/: not JSON \(/);
    expect(problemsOf({ ...base, MERCHANTS_FILE: merchantsFile({ merchants: [] }) })[0]).toMatch(
      /merchants: expected at least one merchant$/,
    );
    const many = Array.from({ length: 65 }, (_, i) => ({ ref: `m${i}`, merchantNo: `M${i}`, privateKeyFiles: ['k'] }));
    expect(problemsOf({ ...base, MERCHANTS_FILE: merchantsFile({ merchants: many }) })[0]).toMatch(
      /merchants: expected at most 64 merchants$/,
    );
  });

  it('needs PLATFORM_BASE_URL only for merchants without their own, and https unless allowed', () => {
    const own = merchantsFile({ merchants: [{ ...a, platformBaseUrl: 'https://a.example' }] });
    expect(problemsOf({ CONSOLE_TOKEN: base.CONSOLE_TOKEN, MERCHANTS_FILE: own }, 'console')).toEqual([]);
    const mixed = merchantsFile({ merchants: [{ ...a, platformBaseUrl: 'http://a.example' }, b] });
    expect(problemsOf({ MERCHANTS_FILE: mixed })).toEqual([
      'PLATFORM_BASE_URL: required for worker by merchants without platformBaseUrl ("b")',
      expect.stringMatching(/^MERCHANTS_FILE: merchant "a".platformBaseUrl: expected an https URL/),
    ]);
  });
});

describe('merchantKeys', () => {
  it("keeps today's names for the default merchant", () => {
    expect(merchantKeys('{mcb}')).toEqual({
      prefix: '{mcb}',
      callbacksQueue: 'callbacks',
      maintenanceQueue: 'maintenance',
      unknownOrderWaiting: '{mcb}:callbacks:unknown-order-waiting',
      fleet: {
        budget: '{mcb}:platform:all:budget',
        alive: '{mcb}:platform:all:alive',
        breaker: '{mcb}:platform:all:breaker',
        probe: '{mcb}:platform:all:probe',
      },
      sweepLock: '{mcb}:maintenance:reconcile-lock',
      laneSnapshots: '{mcb}:platform:all:lanes',
      pausedMirror: '{mcb}:callbacks:merchant-paused',
    });
  });

  it("gives every other merchant its own hash tag, queues and fleet, and never another's key", () => {
    const keysOf = (k: ReturnType<typeof merchantKeys>) => [
      k.unknownOrderWaiting,
      k.sweepLock,
      k.laneSnapshots,
      k.pausedMirror,
      ...Object.values(k.fleet),
      `${k.prefix}:${k.callbacksQueue}:id`,
      `${k.prefix}:${k.maintenanceQueue}:id`,
    ];
    const b = merchantKeys('x{mcb}y', 'b');
    expect(b.prefix).toBe('x{mcb-b}y');
    expect(b.callbacksQueue).toBe('callbacks-b');
    expect(keysOf(b).every((k) => k.includes('{mcb-b}'))).toBe(true);
    // Without a hash tag (one Redis) the prefix is shared, and the names still differ.
    const all = ['default', 'a', 'b', 'all'].flatMap((ref) => keysOf(merchantKeys('mcb', ref)));
    expect(new Set(all).size).toBe(all.length);
  });
});
