import { addressMatcher, configWarnings, loadConfig } from '@mcb/core/config';
import { AppError } from '@mcb/core/errors';
import { describe, expect, it } from 'vitest';

describe('loadConfig', () => {
  it('names a missing MERCHANT_NO and a malformed DATABASE_URL in one error', () => {
    let caught: unknown;
    try {
      loadConfig({ DATABASE_URL: 'not-a-url', PLATFORM_BASE_URL: 'https://127.0.0.1:1' }, 'worker');
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(AppError);
    const err = caught as AppError;
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toMatch(/DATABASE_URL: expected a postgres URL/);
    expect(err.message).toMatch(/MERCHANT_NO: required for worker/);
    expect(err.details?.problems).toHaveLength(2);
  });

  it('lists every bad variable, and hides secret values', () => {
    expect(() =>
      loadConfig(
        { REDIS_URL: 'http://x', INGEST_PORT: '99999', RECONCILE_INTERVAL: 'soon', CONSOLE_TOKEN: 'short-secret' },
        'console',
      ),
    ).toThrowError(
      expect.objectContaining({
        message: expect.stringMatching(
          /REDIS_URL[\s\S]*INGEST_PORT[\s\S]*RECONCILE_INTERVAL[\s\S]*CONSOLE_TOKEN: expected at least 16 characters \(value hidden\)[\s\S]*MERCHANT_NO[\s\S]*PLATFORM_BASE_URL/,
        ),
      }),
    );
  });

  it('applies the contract defaults and freezes the result', () => {
    const config = loadConfig({ MERCHANT_NO: 'M1', MERCHANT_PRIVATE_KEY_FILE: 'keys/a.pem' }, 'ingest');
    expect(config.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/merchant_callbacks');
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(config.QUEUE_PREFIX).toBe('mcb');
    expect([config.INGEST_PORT, config.CONSOLE_PORT, config.SANDBOX_PORT]).toEqual([8080, 8081, 8090]);
    expect(config.RECONCILE_INTERVAL).toBe(300_000);
    expect(config.INGEST_ALLOW_VOLATILE_REDIS).toBe(false);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('requires the key file for ingest and the token for console', () => {
    expect(() => loadConfig({ MERCHANT_NO: 'M1' }, 'ingest')).toThrow(/MERCHANT_PRIVATE_KEY_FILE: required for ingest/);
    expect(() => loadConfig({ MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'http://p' }, 'console')).toThrow(
      /CONSOLE_TOKEN: required for console/,
    );
  });
});

describe('worker tuning knobs', () => {
  it('reads WORKER_LOCK_DURATION and WORKER_STALLED_INTERVAL as durations, unset by default', () => {
    const base = { MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'https://p' };
    expect(loadConfig(base, 'worker').WORKER_LOCK_DURATION).toBeUndefined();
    const set = loadConfig({ ...base, WORKER_LOCK_DURATION: '2s', WORKER_STALLED_INTERVAL: '500ms' }, 'worker');
    expect([set.WORKER_LOCK_DURATION, set.WORKER_STALLED_INTERVAL]).toEqual([2000, 500]);
    expect(() => loadConfig({ ...base, WORKER_LOCK_DURATION: '0s' }, 'worker')).toThrow(
      /WORKER_LOCK_DURATION: expected a duration/,
    );
  });
});

describe('the trust anchor', () => {
  it('refuses an http PLATFORM_BASE_URL unless PLATFORM_ALLOW_HTTP=true, and warns when it is allowed', () => {
    const env = { MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'http://platform.example' };
    expect(() => loadConfig(env, 'worker')).toThrow(
      /PLATFORM_BASE_URL: expected an https URL[\s\S]*PLATFORM_ALLOW_HTTP=true/,
    );
    const allowed = loadConfig({ ...env, PLATFORM_ALLOW_HTTP: 'true' }, 'worker');
    expect(allowed.PLATFORM_BASE_URL).toBe('http://platform.example');
    expect(configWarnings(allowed)).toEqual([expect.stringContaining('PLATFORM_ALLOW_HTTP=true')]);
    const https = loadConfig({ ...env, PLATFORM_BASE_URL: 'https://platform.example' }, 'worker');
    expect(configWarnings(https)).toEqual([]);
  });
});

describe('the public listener bounds', () => {
  it('defaults to seconds, refuses 0 (which would mean no bound) and a headers bound above the request bound', () => {
    const config = loadConfig({}, 'cli');
    expect([
      config.INGEST_HEADERS_TIMEOUT,
      config.INGEST_REQUEST_TIMEOUT,
      config.INGEST_BODY_TIMEOUT,
      config.INGEST_IDLE_TIMEOUT,
    ]).toEqual([5000, 10_000, 1000, 10_000]);
    expect([
      config.INGEST_MAX_CONNECTIONS,
      config.INGEST_MAX_CONNECTIONS_PER_ADDRESS,
      config.INGEST_ALLOWED_SOURCES,
    ]).toEqual(['auto', 256, undefined]);
    expect(() => loadConfig({ INGEST_REQUEST_TIMEOUT: '0s' }, 'cli')).toThrow(
      /INGEST_REQUEST_TIMEOUT: expected a duration .*more than 0/,
    );
    expect(() => loadConfig({ INGEST_BODY_TIMEOUT: '0s' }, 'cli')).toThrow(
      /INGEST_BODY_TIMEOUT: expected a duration .*more than 0/,
    );
    expect(() => loadConfig({ INGEST_HEADERS_TIMEOUT: '20s' }, 'cli')).toThrow(
      /INGEST_HEADERS_TIMEOUT: must not exceed INGEST_REQUEST_TIMEOUT/,
    );
  });

  it('takes auto or a whole number of connections', () => {
    expect(loadConfig({ INGEST_MAX_CONNECTIONS: ' 5000 ' }, 'cli').INGEST_MAX_CONNECTIONS).toBe(5000);
    for (const bad of ['0', '1.5', 'many', '-1', '2000000']) {
      expect(() => loadConfig({ INGEST_MAX_CONNECTIONS: bad }, 'cli')).toThrow(
        /INGEST_MAX_CONNECTIONS: expected auto or a whole number from 1 to 1000000/,
      );
    }
  });

  it('reads INGEST_ALLOWED_SOURCES as IPv4 and IPv6 addresses and CIDR ranges, and names a bad entry', () => {
    const config = loadConfig({ INGEST_ALLOWED_SOURCES: ' 203.0.113.0/24, 198.51.100.7 ,2001:db8::/32, ::1 ' }, 'cli');
    expect(config.INGEST_ALLOWED_SOURCES).toEqual([
      { address: '203.0.113.0', prefix: 24, family: 'ipv4' },
      { address: '198.51.100.7', prefix: 32, family: 'ipv4' },
      { address: '2001:db8::', prefix: 32, family: 'ipv6' },
      { address: '::1', prefix: 128, family: 'ipv6' },
    ]);
    expect(loadConfig({ INGEST_ALLOWED_SOURCES: '  ' }, 'cli').INGEST_ALLOWED_SOURCES).toBeUndefined();
    const refused: [string, RegExp][] = [
      ['10.0.0.0/8,platform.example', /"platform\.example" is not an IPv4 or IPv6 address or CIDR range/],
      [
        '10.0.0.5/8',
        /"10\.0\.0\.5\/8" has bits set after the \/8 prefix: write the network address, or \/32 for one host/,
      ],
      ['2001:db8::1/64', /"2001:db8::1\/64" has bits set after the \/64 prefix/],
      ['10.0.0.0/33', /"10\.0\.0\.0\/33": the prefix length must be a number from 0 to 32/],
      ['::/129', /the prefix length must be a number from 0 to 128/],
      ['10.0.0.0/8/1', /is not an IPv4 or IPv6 address or CIDR range/],
    ];
    for (const [value, message] of refused) {
      expect(() => loadConfig({ INGEST_ALLOWED_SOURCES: value }, 'cli')).toThrow(message);
      expect(() => loadConfig({ INGEST_ALLOWED_SOURCES: value }, 'cli')).toThrow(/INGEST_ALLOWED_SOURCES: /);
    }
  });

  it('reads CONSOLE_TRUSTED_PROXIES with the same parser: a range with host bits set is refused there too', () => {
    expect(loadConfig({ CONSOLE_TRUSTED_PROXIES: '10.9.0.0/16, 127.0.0.2' }, 'cli').CONSOLE_TRUSTED_PROXIES).toEqual([
      { address: '10.9.0.0', prefix: 16, family: 'ipv4' },
      { address: '127.0.0.2', prefix: 32, family: 'ipv4' },
    ]);
    expect(() => loadConfig({ CONSOLE_TRUSTED_PROXIES: '10.9.0.5/16' }, 'cli')).toThrow(
      /CONSOLE_TRUSTED_PROXIES: .*has bits set after the \/16 prefix/,
    );
  });

  it('matches an address against the ranges, an IPv4-mapped IPv6 peer as IPv4, and never an unknown peer', () => {
    const inRanges = addressMatcher(
      loadConfig({ INGEST_ALLOWED_SOURCES: '10.9.0.0/16, ::1' }, 'cli').INGEST_ALLOWED_SOURCES!,
    );
    expect(
      ['10.9.1.2', '::ffff:10.9.1.2', '::1', '10.8.0.1', '::ffff:10.8.0.1', '::2', undefined].map(inRanges),
    ).toEqual([true, true, true, false, false, false, false]);
  });
});
