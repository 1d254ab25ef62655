import { pino, type Logger, type LoggerOptions } from 'pino';
import pretty from 'pino-pretty';
import { causeChain } from './errors.ts';

export type { Logger } from 'pino';

/**
 * Paths that must never reach a log line: request bodies (callbacks are encrypted records whose full content
 * we do not log), decrypted records, key material and credentials.
 */
export const REDACT_PATHS: readonly string[] = [
  'body',
  'req.body',
  'request.body',
  'rawBody',
  'encryptedData',
  '*.encryptedData',
  'record',
  '*.record',
  'plaintext',
  '*.plaintext',
  'privateKey',
  '*.privateKey',
  'privateKeyPem',
  '*.privateKeyPem',
  'key',
  '*.key',
  'token',
  '*.token',
  'password',
  '*.password',
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'CONSOLE_TOKEN',
  '*.CONSOLE_TOKEN',
];

/** Options of {@link createLogger}. */
export interface LoggerFactoryOptions {
  /** The app's name, on every line as `app`. */
  name: string;
  /** pino level. @defaultValue 'info' */
  level?: LoggerOptions['level'];
  /** Where lines go; tests pass a stream to read them back. @defaultValue stdout */
  destination?: pino.DestinationStream;
  /**
   * `json` (one object per line: production, log shippers) or `pretty` (pino-pretty: colours when the output is a
   * terminal, time, app, message, the rest as key: value; for a person at a terminal). Redaction applies to both.
   * @defaultValue 'json'
   */
  format?: LogFormat;
}

export type LogFormat = 'json' | 'pretty';

/**
 * The log format from `LOG_FORMAT`, read before the rest of the config (a main's logger exists before its config is
 * validated, to report what is wrong); anything but `pretty` is JSON, and loadConfig names an invalid value.
 */
export function logFormatOf(env: Record<string, string | undefined>): LogFormat {
  return env.LOG_FORMAT?.trim() === 'pretty' ? 'pretty' : 'json';
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** The error and the causes it wraps, as far as they are objects (what the serializer can scrub). */
function chainOf(err: unknown): Record<string, unknown>[] {
  const chain = causeChain(err);
  const end = chain.findIndex((c) => typeof c !== 'object');
  return (end === -1 ? chain : chain.slice(0, end)) as Record<string, unknown>[];
}

/** A Postgres message without the value it may quote last (`invalid input syntax for type integer: "12.5"`). */
export function scrubDatabaseMessage(message: string): string {
  return message.replace(/\nparams: [\s\S]*$/, '').replace(/: "(?:[^"\\]|\\.)*"$/, ': "[redacted]"');
}

/**
 * pino's error serializer, minus the values a database error carries: drizzle's DrizzleQueryError has the
 * statement's `params` (in a field and in its message); Postgres quotes the offending value in some messages and
 * the whole row in a constraint violation's detail. What stays says what failed: the SQL text with its
 * placeholders, the SQLSTATE, the constraint, table and column.
 */
export function serializeError(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error) as unknown as Record<string, unknown>;
  if (!out || typeof out !== 'object') return out;
  const chain = chainOf(err);
  const pgError = chain.find((e) => typeof e.code === 'string' && SQLSTATE.test(e.code) && 'severity' in e);
  const fromDb = pgError !== undefined || chain.some((e) => 'params' in e && 'query' in e);
  if (!fromDb) return out;
  if ('params' in out) out.params = '[redacted]';
  if (typeof out.message === 'string') out.message = scrubDatabaseMessage(out.message);
  // The stack repeats the message and every cause's message: keep the frames of the top error only.
  if (typeof out.stack === 'string') {
    const [head = ''] = out.stack.split('\ncaused by:');
    out.stack = head
      .replace(/\nparams: [^\n]*/, '')
      .replace(/^(.*?): (.*)$/m, (_l, type: string, m: string) => `${type}: ${scrubDatabaseMessage(m)}`);
  }
  if (typeof out.detail === 'string') out.detail = /^Key \(/.test(out.detail) ? out.detail : '[redacted]';
  if (pgError) {
    out.db = {
      code: pgError.code,
      ...(typeof pgError.message === 'string' ? { message: scrubDatabaseMessage(pgError.message) } : {}),
      ...Object.fromEntries(
        ['constraint', 'table', 'column', 'routine'].flatMap((k) =>
          typeof pgError[k] === 'string' ? [[k, pgError[k]]] : [],
        ),
      ),
    };
  }
  return out;
}

/** A pino logger with the pipeline's redaction rules. */
export function createLogger(options: LoggerFactoryOptions): Logger {
  const opts: LoggerOptions = {
    name: options.name,
    level: options.level ?? 'info',
    base: { app: options.name },
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    serializers: { err: serializeError },
  };
  if (options.format === 'pretty') {
    // Colours are pino-pretty's own choice for stdout (a terminal, or FORCE_COLOR=1 as `pnpm dev` sets for its
    // children); never for a given stream.
    const stream = pretty({
      destination: options.destination ?? 1,
      sync: true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,app',
      // One line per entry (a request log was eight: `pnpm dev` printed 8,400 lines in 7 minutes); an error's stack
      // still prints below its line.
      singleLine: true,
      ...(options.destination ? { colorize: false } : {}),
    });
    return pino(opts, stream);
  }
  return options.destination ? pino(opts, options.destination) : pino(opts);
}

export { createLogThrottle, type LogThrottle, type LogThrottleOptions } from './log-throttle.ts';
