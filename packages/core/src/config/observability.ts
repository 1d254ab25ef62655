/**
 * Logs and traces of every process (docs/observability.md); each process's metrics listener is in its own area.
 */
import { z } from 'zod';
import { optionalUrl } from './fields.ts';

/** The observability area of the config schema (composed in index.ts). */
export const observabilityFields = {
  /** Log lines as JSON (production) or through pino-pretty for a person at a terminal (`pnpm dev` sets pretty). */
  LOG_FORMAT: z.enum(['json', 'pretty']).default('json'),
  /** Log level of every process (pino): fatal, error, warn, info, debug, trace or silent. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * OpenTelemetry traces go to this OTLP/HTTP collector (the standard variable; OTEL_EXPORTER_OTLP_HEADERS and the
   * other OTEL_EXPORTER_OTLP_* variables apply too). Unset: no tracing, at no cost (docs/observability.md).
   */
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalUrl(['http:', 'https:'], 'http(s)'),
  /** `console` prints spans to stdout (`pnpm dev --traces`); `none` turns tracing off; `otlp` needs the endpoint. */
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'console', 'none']).optional(),
};
