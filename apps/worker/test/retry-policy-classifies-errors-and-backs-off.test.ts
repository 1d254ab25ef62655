import { AppError, ErrorCodes } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient } from '@mcb/core/platform';
import { CALLBACK_BACKOFF, callbackJobOptions } from '@mcb/core/queue';
import { createRedis } from '@mcb/core/redis';
import { MERCHANT_NO, useTestEnv } from '@mcb/testkit';
import { Backoffs, UnrecoverableError, type Job } from 'bullmq';
import { DrizzleQueryError } from 'drizzle-orm';
import { describe, expect, it, vi } from 'vitest';
import {
  callbackBackoffDelay,
  classifyError,
  discardsConnection,
  toJobError,
  TRANSIENT_SQLSTATE_CLASSES,
  TRANSIENT_SQLSTATES,
} from '@mcb/settlement';
import { TRANSIENT_NETWORK_CODES } from '@mcb/core/spec';
import { createCallbackWorker } from '../src/callback-worker.ts';

const env = useTestEnv();

const pgError = (code: string, message = 'pg error') => Object.assign(new Error(message), { code });

describe('classifyError decides retry or give up', () => {
  it.each([
    ['serialization failure 40001', pgError('40001')],
    ['deadlock 40P01', pgError('40P01')],
    ['admin shutdown 57P01', pgError('57P01')],
    [
      'read-only transaction 25006 (a demoted primary, a standby)',
      pgError('25006', 'cannot execute INSERT in a read-only transaction'),
    ],
    ['crash shutdown 57P02', pgError('57P02')],
    ['in recovery 57P03', pgError('57P03', 'the database system is in recovery mode')],
    ['idle session timeout 57P05', pgError('57P05')],
    ['idle-in-transaction timeout 25P03', pgError('25P03')],
    [
      'cancelled by recovery conflict on a standby 40001',
      pgError('40001', 'canceling statement due to conflict with recovery'),
    ],
    ['statement completion unknown 40003', pgError('40003')],
    ['lock not available 55P03', pgError('55P03')],
    ['statement timeout 57014', pgError('57014', 'canceling statement due to statement timeout')],
    ['drizzle-wrapped statement timeout 57014', new DrizzleQueryError('insert', ['secret'], pgError('57014'))],
    ['socket timeout ETIMEDOUT', pgError('ETIMEDOUT', 'connect ETIMEDOUT 10.0.0.5:5432')],
    ['drizzle-wrapped ETIMEDOUT', new DrizzleQueryError('select 1', [], pgError('ETIMEDOUT'))],
    ['disk full 53100', pgError('53100')],
    ['I/O error 58030', pgError('58030')],
    ['drizzle-wrapped read-only transaction', new DrizzleQueryError('insert', ['secret'], pgError('25006'))],
    ['connection exception class 08', pgError('08006')],
    ['too many connections 53300', pgError('53300')],
    ['connection refused', pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432')],
    ['connection reset', pgError('ECONNRESET')],
    ['pg connection lost', new Error('Connection terminated unexpectedly')],
    ['pool connect timeout', new Error('timeout exceeded when trying to connect')],
    ['drizzle-wrapped connection loss', new DrizzleQueryError('select 1', [], pgError('ECONNREFUSED'))],
    [
      'transient AppError (platform 5xx)',
      new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 503', { transient: true }),
    ],
    ['an unknown error', new Error('something odd')],
  ])('%s is transient', (_name, e) => {
    expect(classifyError(e)).toBe('transient');
  });

  it.each([
    ['unique violation 23505', pgError('23505')],
    ['undefined column 42703', pgError('42703')],
    ['in failed transaction 25P02 (an earlier error was swallowed: a bug)', pgError('25P02')],
    ['deferred constraint 40002', pgError('40002')],
    ['database dropped 57P04', pgError('57P04')],
    ['undefined file 58P01', pgError('58P01')],
    ['drizzle-wrapped check violation', new DrizzleQueryError('insert', ['secret'], pgError('23514'))],
    ['a verification failure', new AppError(ErrorCodes.VERIFY_AMOUNT_MISMATCH, 'amount')],
    ['platform 4xx', new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, 'HTTP 401')],
    ['UnrecoverableError', new UnrecoverableError('stop')],
    ['a programming error', new TypeError('x is undefined')],
  ])('%s is permanent', (_name, e) => {
    expect(classifyError(e)).toBe('permanent');
  });
});

describe('every code of the transient sets is classified transient, wrapped or not', () => {
  // A code the sets name must never end as a job failed for good (each one alone: a set that a refactor empties or a
  // classification that stops reading it fails here). 57014 and ETIMEDOUT are also named above on their own.
  const walk = [
    ...[...TRANSIENT_SQLSTATES].map((code) => [`SQLSTATE ${code}`, code]),
    ...[...TRANSIENT_SQLSTATE_CLASSES].map((cls) => [`SQLSTATE class ${cls} (${cls}000)`, `${cls}000`]),
    ...[...TRANSIENT_NETWORK_CODES].map((code) => [`socket ${code}`, code]),
  ];
  it('names 57014 and ETIMEDOUT among them', () => {
    expect(TRANSIENT_SQLSTATES.has('57014')).toBe(true);
    expect(TRANSIENT_NETWORK_CODES.has('ETIMEDOUT')).toBe(true);
    expect(walk.length).toBeGreaterThan(20);
  });
  it.each(walk)('%s', (_name, code) => {
    expect(classifyError(pgError(code!))).toBe('transient');
    expect(classifyError(new DrizzleQueryError('insert', ['secret'], pgError(code!)))).toBe('transient');
    expect(
      classifyError(new AppError(ErrorCodes.DB_UNAVAILABLE, 'wrapped', { transient: true, cause: pgError(code!) })),
    ).toBe('transient');
  });
});

describe('discardsConnection: which answers close the connection instead of pooling it', () => {
  it.each([
    ['25006 read-only (a demoted primary keeps answering it)', pgError('25006')],
    ['57P01 admin shutdown', pgError('57P01')],
    ['57P03 in recovery', pgError('57P03')],
    ['08006 connection failure', pgError('08006')],
    ['a lost socket', new Error('Connection terminated unexpectedly')],
    ['ECONNRESET', pgError('ECONNRESET')],
    ['drizzle-wrapped 25006', new DrizzleQueryError('insert', [], pgError('25006'))],
  ])('%s: closed', (_name, e) => {
    expect(discardsConnection(e)).toBe(true);
  });

  it.each([
    ['40001 serialization failure', pgError('40001')],
    ['40P01 deadlock', pgError('40P01')],
    ['55P03 lock not available', pgError('55P03')],
    ['57014 statement timeout', pgError('57014')],
    ['23505 unique violation', pgError('23505')],
    ['a verification failure', new AppError(ErrorCodes.VERIFY_AMOUNT_MISMATCH, 'amount')],
  ])('%s: the connection is sound, kept', (_name, e) => {
    expect(discardsConnection(e)).toBe(false);
  });
});

describe('toJobError', () => {
  it('turns a permanent error into UnrecoverableError carrying the code and reason', () => {
    const err = toJobError(new AppError(ErrorCodes.JOB_PAYLOAD_INVALID, 'state 9 is not final'));
    expect(err).toBeInstanceOf(UnrecoverableError);
    expect(err.message).toBe('JOB_PAYLOAD_INVALID: state 9 is not final');
  });

  it('keeps a transient error retryable and drops the SQL parameters drizzle puts in its message', () => {
    const wrapped = new DrizzleQueryError(
      'insert into callback_receipts values ($1)',
      ['P123-secret-record'],
      pgError('ECONNREFUSED', 'connect ECONNREFUSED'),
    );
    const err = toJobError(wrapped);
    expect(err).not.toBeInstanceOf(UnrecoverableError);
    expect(err.message).toBe('connect ECONNREFUSED');
    expect(err.message).not.toContain('P123-secret-record');
  });

  it('names the SQLSTATE of a permanent database error without its parameters', () => {
    const err = toJobError(
      new DrizzleQueryError('insert', ['P123-secret-record'], pgError('23514', 'violates check constraint')),
    );
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

  it("spreads the jobs' attempts over more than 8 hours: the worker's strategy, as BullMQ calls it with the job options", async () => {
    // The worker as main.ts builds it (no backoff option: the defaults), not started; its registered strategy is
    // what BullMQ runs for a job whose options name CALLBACK_BACKOFF.
    const connection = createRedis(env.redisUrl, 'worker');
    const platform = createPlatformClient({ baseUrl: 'http://127.0.0.1:9', merchantNo: MERCHANT_NO, timeoutMs: 1000 });
    const worker = createCallbackWorker({
      connection,
      prefix: env.prefix,
      db: env.db.db,
      platform,
      logger: createLogger({ name: 'backoff', level: 'silent' }),
      autorun: false,
    });
    try {
      const strategy = worker.opts.settings?.backoffStrategy;
      expect(strategy).toBeTypeOf('function');
      const backoff = Backoffs.normalize(callbackJobOptions.backoff);
      expect(backoff).toEqual({ type: CALLBACK_BACKOFF });
      const job = { opts: callbackJobOptions } as unknown as Job;
      const error = new Error('platform down');
      /** The delays BullMQ would wait between the attempts of one job, in hours, with `Math.random` as given. */
      const scheduleHours = (random: () => number): number => {
        const spy = vi.spyOn(Math, 'random').mockImplementation(random);
        try {
          let total = 0;
          for (let attemptsMade = 1; attemptsMade < callbackJobOptions.attempts; attemptsMade++) {
            const delay = Backoffs.calculate(backoff!, attemptsMade, error, job, strategy) as number;
            expect(delay).toBeGreaterThanOrEqual(0);
            expect(delay).toBeLessThanOrEqual(600_000); // never more than 10 minutes between two tries
            total += delay;
          }
          return total / 3_600_000;
        } finally {
          spy.mockRestore();
        }
      };
      // A median draw every time, then 200 schedules drawn from a seeded generator: the mean is the expected span.
      expect(scheduleHours(() => 0.5)).toBeGreaterThan(8);
      const draw = seeded(24);
      const spans = Array.from({ length: 200 }, () => scheduleHours(draw));
      const mean = spans.reduce((a, b) => a + b, 0) / spans.length;
      expect(mean).toBeGreaterThan(8);
      expect(mean).toBeLessThan(8.5); // docs/worker.md: "about 8.2 hours"
    } finally {
      await worker.close();
      await platform.close();
      await connection.quit();
    }
  });
});

/** A small seeded generator (mulberry32): the same draws on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
