import { AppError, ErrorCodes } from '@mcb/core/errors';
import { UnrecoverableError } from 'bullmq';
import { DrizzleQueryError } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { callbackBackoffDelay, classifyError, toJobError } from '@mcb/settlement';

const pgError = (code: string, message = 'pg error') => Object.assign(new Error(message), { code });

describe('classifyError decides retry or give up', () => {
  it.each([
    ['serialization failure 40001', pgError('40001')],
    ['deadlock 40P01', pgError('40P01')],
    ['admin shutdown 57P01', pgError('57P01')],
    ['connection exception class 08', pgError('08006')],
    ['too many connections 53300', pgError('53300')],
    ['connection refused', pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')],
    ['connection reset', pgError('ECONNRESET')],
    ['pg connection lost', new Error('Connection terminated unexpectedly')],
    ['pool connect timeout', new Error('timeout exceeded when trying to connect')],
    ['drizzle-wrapped connection loss', new DrizzleQueryError('select 1', [], pgError('ECONNREFUSED'))],
    ['transient AppError (platform 5xx)', new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 503', { transient: true })],
    ['an unknown error', new Error('something odd')],
  ])('%s is transient', (_name, e) => {
    expect(classifyError(e)).toBe('transient');
  });

  it.each([
    ['unique violation 23505', pgError('23505')],
    ['undefined column 42703', pgError('42703')],
    ['drizzle-wrapped check violation', new DrizzleQueryError('insert', ['secret'], pgError('23514'))],
    ['a verification failure', new AppError(ErrorCodes.VERIFY_AMOUNT_MISMATCH, 'amount')],
    ['platform 4xx', new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 401')],
    ['UnrecoverableError', new UnrecoverableError('stop')],
    ['a programming error', new TypeError('x is undefined')],
  ])('%s is permanent', (_name, e) => {
    expect(classifyError(e)).toBe('permanent');
  });
});

describe('toJobError', () => {
  it('turns a permanent error into UnrecoverableError carrying the code and reason', () => {
    const err = toJobError(new AppError(ErrorCodes.JOB_PAYLOAD_INVALID, 'state 9 is not final'));
    expect(err).toBeInstanceOf(UnrecoverableError);
    expect(err.message).toBe('JOB_PAYLOAD_INVALID: state 9 is not final');
  });

  it('keeps a transient error retryable and drops the SQL parameters drizzle puts in its message', () => {
    const wrapped = new DrizzleQueryError('insert into callback_receipts values ($1)', ['P123-secret-record'], pgError('ECONNREFUSED', 'connect ECONNREFUSED'));
    const err = toJobError(wrapped);
    expect(err).not.toBeInstanceOf(UnrecoverableError);
    expect(err.message).toBe('connect ECONNREFUSED');
    expect(err.message).not.toContain('P123-secret-record');
  });

  it('names the SQLSTATE of a permanent database error without its parameters', () => {
    const err = toJobError(new DrizzleQueryError('insert', ['P123-secret-record'], pgError('23514', 'violates check constraint')));
    expect(err).toBeInstanceOf(UnrecoverableError);
    expect(err.message).toBe('DB_QUERY_FAILED: 23514 violates check constraint');
  });
});

describe('callbackBackoffDelay: exponential, full jitter, capped', () => {
  it('stays within [0, min(cap, base * 2^(n-1))] for every attempt', () => {
    for (let n = 1; n <= 60; n++) {
      for (const r of [0, 0.25, 0.999999]) {
        const d = callbackBackoffDelay(n, { random: () => r });
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThanOrEqual(Math.min(600_000, 1000 * 2 ** (n - 1)));
      }
    }
  });

  it('grows exponentially before the cap', () => {
    const top = (n: number) => callbackBackoffDelay(n, { random: () => 0.999999 });
    expect(top(1)).toBe(1000);
    expect(top(2)).toBe(2000);
    expect(top(5)).toBe(16_000);
    expect(top(30)).toBe(600_000);
  });

  it('spreads 60 attempts over more than 8 hours on average (rides out a long outage)', () => {
    // Expected total with a uniform draw: E[min(cap, U * M)] = cap - cap^2 / (2M) once M > cap, else M / 2.
    let expected = 0;
    for (let n = 1; n < 60; n++) {
      const m = 1000 * 2 ** (n - 1);
      expected += m <= 600_000 ? m / 2 : 600_000 - 600_000 ** 2 / (2 * m);
    }
    expect(expected / 3_600_000).toBeGreaterThan(8);
    // And a median draw schedule is of the same order.
    let median = 0;
    for (let n = 1; n < 60; n++) median += callbackBackoffDelay(n, { random: () => 0.5 });
    expect(median / 3_600_000).toBeGreaterThan(8);
  });
});
