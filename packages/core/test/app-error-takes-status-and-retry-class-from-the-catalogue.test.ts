import {
  AppError,
  causeChain,
  ERROR_CATALOGUE,
  ErrorCodes,
  isRefusal,
  retryClassOf,
  statusOf,
  type ErrorCode,
} from '@mcb/core/errors';
import { describe, expect, it } from 'vitest';

const codes = Object.keys(ERROR_CATALOGUE) as ErrorCode[];

describe('the error catalogue', () => {
  it('names each code by itself', () => {
    for (const code of codes) expect(ErrorCodes[code]).toBe(code);
    expect(Object.values(ErrorCodes)).toEqual(codes);
  });

  it('answers every content failure of a callback with one status (no failure tells a sender more)', () => {
    const statuses = new Set(codes.filter((c) => c.startsWith('CALLBACK_')).map(statusOf));
    expect([...statuses]).toEqual([400]);
  });

  it('answers every refusal of Redis with the status of a failed enqueue: 503, the platform retries', () => {
    const refusals = [
      ErrorCodes.ENQUEUE_FAILED,
      ErrorCodes.REDIS_NOT_DURABLE,
      ErrorCodes.REDIS_MEMORY_LOW,
      ErrorCodes.REDIS_REPLICAS_OFFLINE,
    ];
    expect(refusals.map(statusOf)).toEqual([503, 503, 503, 503]);
    expect(refusals.map(retryClassOf)).toEqual(['transient', 'transient', 'transient', 'transient']);
  });

  it('calls a code a refusal exactly when its status is a 4xx, and a client code always is one', () => {
    expect(isRefusal(ErrorCodes.REQUEST_INVALID)).toBe(true);
    expect(isRefusal(ErrorCodes.RECONCILE_IN_PROGRESS)).toBe(true);
    expect(isRefusal(ErrorCodes.MERCHANT_UNKNOWN)).toBe(false);
    expect(isRefusal(ErrorCodes.DB_COMMIT_IN_DOUBT)).toBe(false);
    for (const code of codes) {
      const { status, retry } = ERROR_CATALOGUE[code];
      expect(isRefusal(code)).toBe(status >= 400 && status < 500);
      if (retry === 'client') expect(isRefusal(code), code).toBe(true);
      if (retry === 'permanent') expect(isRefusal(code), code).toBe(false);
    }
  });
});

describe('AppError', () => {
  it("is transient when its code's class is, unless its thrower says otherwise", () => {
    expect(new AppError(ErrorCodes.DB_UNAVAILABLE, 'down').transient).toBe(true);
    expect(new AppError(ErrorCodes.PLATFORM_TIMEOUT, 'slow').transient).toBe(true);
    expect(new AppError(ErrorCodes.VERIFY_AMOUNT_MISMATCH, 'amount').transient).toBe(false);
    expect(new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 403').transient).toBe(false);
    expect(new AppError(ErrorCodes.REQUEST_INVALID, 'bad').transient).toBe(false);
    expect(new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 503', { transient: true }).transient).toBe(true);
    expect(new AppError(ErrorCodes.DB_UNAVAILABLE, 'at start', { transient: false }).transient).toBe(false);
  });
});

describe('causeChain', () => {
  it('lists what was thrown, then each cause it wraps', () => {
    const root = Object.assign(new Error('connection lost'), { code: '08006' });
    const middle = new Error('query failed', { cause: root });
    const top = new AppError(ErrorCodes.DB_UNAVAILABLE, 'down', { cause: middle });
    expect(causeChain(top)).toEqual([top, middle, root]);
    expect(causeChain('text')).toEqual(['text']);
    expect(causeChain(undefined)).toEqual([]);
  });

  it('stops at a cycle and after eight links', () => {
    const a: { cause?: unknown } = {};
    const b = { cause: a };
    a.cause = b;
    expect(causeChain(a)).toEqual([a, b]);
    let deep: { cause?: unknown } = { cause: undefined };
    for (let i = 0; i < 20; i++) deep = { cause: deep };
    expect(causeChain(deep)).toHaveLength(8);
  });
});
