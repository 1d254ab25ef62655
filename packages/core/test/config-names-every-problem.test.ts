import { configWarnings, loadConfig } from '@mcb/core/config';
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
    expect(() => loadConfig({ ...base, WORKER_LOCK_DURATION: '0s' }, 'worker')).toThrow(/WORKER_LOCK_DURATION: expected a duration/);
  });
});

describe('the trust anchor', () => {
  it('refuses an http PLATFORM_BASE_URL unless PLATFORM_ALLOW_HTTP=true, and warns when it is allowed', () => {
    const env = { MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'http://platform.example' };
    expect(() => loadConfig(env, 'worker')).toThrow(/PLATFORM_BASE_URL: expected an https URL[\s\S]*PLATFORM_ALLOW_HTTP=true/);
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
    expect([config.INGEST_HEADERS_TIMEOUT, config.INGEST_REQUEST_TIMEOUT, config.INGEST_IDLE_TIMEOUT, config.INGEST_MAX_CONNECTIONS]).toEqual([5000, 10_000, 10_000, 1024]);
    expect(() => loadConfig({ INGEST_REQUEST_TIMEOUT: '0s' }, 'cli')).toThrow(/INGEST_REQUEST_TIMEOUT: expected a duration .*more than 0/);
    expect(() => loadConfig({ INGEST_HEADERS_TIMEOUT: '20s' }, 'cli')).toThrow(/INGEST_HEADERS_TIMEOUT: must not exceed INGEST_REQUEST_TIMEOUT/);
  });
});
