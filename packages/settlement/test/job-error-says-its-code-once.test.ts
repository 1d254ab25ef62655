import { describe, expect, it } from 'vitest';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { describeJobError, giveUp, toJobError } from '@mcb/settlement';
import { UnrecoverableError } from 'bullmq';

// What a person reads about a failed attempt (the callback's timeline, the dashboard): the code once, then why. A
// job that failed for good on a missing table once read `DB_QUERY_FAILED: DB_QUERY_FAILED: 42P01 ...`.
describe('describeJobError', () => {
  it('says the code of a give-up once', () => {
    const missingTable = Object.assign(new Error('relation "orders" does not exist'), {
      code: '42P01',
      severity: 'ERROR',
    });
    const err = toJobError(missingTable); // permanent: a give-up carrying the DB_QUERY_FAILED it stands for
    expect(err).toBeInstanceOf(UnrecoverableError);
    expect(err.message).toBe('DB_QUERY_FAILED: 42P01 relation "orders" does not exist');
    expect(describeJobError(err)).toBe('DB_QUERY_FAILED: 42P01 relation "orders" does not exist');
  });

  it('puts the code before a message that lacks it, and keeps only the first line', () => {
    expect(
      describeJobError(
        new AppError(ErrorCodes.PLATFORM_TIMEOUT, 'Get order took longer than 10 s\nat ...', { transient: true }),
      ),
    ).toBe('PLATFORM_TIMEOUT: Get order took longer than 10 s');
    expect(describeJobError(new TypeError('x is not a function'))).toBe('TypeError: x is not a function');
    expect(describeJobError(giveUp(new AppError(ErrorCodes.JOB_PAYLOAD_INVALID, 'state 9 is not final')))).toBe(
      'JOB_PAYLOAD_INVALID: state 9 is not final',
    );
  });
});
