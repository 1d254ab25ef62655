import { pino, type Logger, type LoggerOptions } from 'pino';

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
}

/** A pino logger with the pipeline's redaction rules. */
export function createLogger(options: LoggerFactoryOptions): Logger {
  const opts: LoggerOptions = {
    name: options.name,
    level: options.level ?? 'info',
    base: { app: options.name },
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    serializers: { err: pino.stdSerializers.err },
  };
  return options.destination ? pino(opts, options.destination) : pino(opts);
}
