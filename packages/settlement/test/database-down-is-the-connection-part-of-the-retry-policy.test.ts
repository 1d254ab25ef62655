import { AppError, ErrorCodes } from '@mcb/core/errors';
import { classifyError, isDatabaseDown } from '@mcb/settlement';
import { DrizzleQueryError } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';

// The console answers these 503 DB_UNAVAILABLE: the database is not there, as opposed to a statement that failed.
// The retry policy decides it, so the console and the worker never disagree about what an outage looks like.

const pgError = (code: string, message = 'pg error') => Object.assign(new Error(message), { code });

describe('isDatabaseDown', () => {
  it.each([
    ['connection refused', pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')],
    ['connection reset', pgError('ECONNRESET')],
    ['socket timeout', pgError('ETIMEDOUT')],
    ['admin shutdown 57P01', pgError('57P01')],
    ['crash shutdown 57P02', pgError('57P02')],
    ['starting up or in recovery 57P03', pgError('57P03')],
    ['too many connections 53300', pgError('53300')],
    ['connection exception 08000', pgError('08000')],
    ['unable to connect 08001', pgError('08001')],
    ['connection does not exist 08003', pgError('08003')],
    ['connection failure 08006', pgError('08006')],
    ['pool connect timeout', new Error('timeout exceeded when trying to connect')],
    ['pg connection lost', new Error('Connection terminated unexpectedly')],
    ['drizzle-wrapped refusal', new DrizzleQueryError('select 1', [], pgError('ECONNREFUSED'))],
    ['an AppError that wraps one', new AppError(ErrorCodes.DB_UNAVAILABLE, 'down', { cause: pgError('57P01') })],
  ])('%s: down, and transient for the retry policy', (_name, e) => {
    expect(isDatabaseDown(e)).toBe(true);
    expect(classifyError(e)).toBe('transient');
  });

  it.each([
    ['a unique violation 23505', pgError('23505')],
    ['a statement timeout 57014 (the database is there)', pgError('57014')],
    ['a serialization failure 40001', pgError('40001')],
    ['a read-only transaction 25006', pgError('25006')],
    ['a plain bug', new TypeError('x is undefined')],
    ['nothing thrown', undefined],
  ])('%s: not down', (_name, e) => {
    expect(isDatabaseDown(e)).toBe(false);
  });
});
