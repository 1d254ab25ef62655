/**
 * OpenTelemetry traces: one trace per callback, ingest → queue → worker → Postgres. Off unless a process starts it
 * ({@link startTracing}, from OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER=console); while off, every helper
 * here returns at its first line without touching the OpenTelemetry API, so the hot path pays one boolean check.
 *
 * Attributes are order numbers, states, outcomes, error codes and key ids: never amounts, bodies or key material.
 * The span context crosses the queue inside the job (BullMQ's telemetry support through `bullmq-otel`); the text
 * BullMQ copies into spans (a job's return value, its failure message) has its numbers masked (tracing-bullmq.ts).
 */
import {
  context,
  propagation,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { Telemetry } from 'bullmq';
import { BullMQOtel } from 'bullmq-otel';
import { AppError } from './errors.ts';
import { maskedTelemetry } from './tracing-bullmq.ts';

export type { Context, Span } from '@opentelemetry/api';
/** For tests: pass one to {@link startTracing} and read the finished spans. */
export { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

const TRACER_NAME = 'merchant-callbacks';
let provider: NodeTracerProvider | undefined;
let telemetry: Telemetry | undefined;

/** Whether this process records traces. */
export function tracingEnabled(): boolean {
  return provider !== undefined;
}

/** Where spans go: the OTLP endpoint (standard OTEL_EXPORTER_OTLP_* variables), the console, or nowhere. */
export interface TracingSettings {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
  /** `otlp` (the default when an endpoint is set), `console` (`pnpm dev --traces`), or `none`. */
  OTEL_TRACES_EXPORTER?: string | undefined;
  OTEL_SDK_DISABLED?: string | undefined;
  OTEL_SERVICE_NAME?: string | undefined;
}

/** A started tracer: `shutdown()` flushes the spans still buffered (call it on stop). */
export interface TracingHandle {
  shutdown(): Promise<void>;
}

/**
 * Start tracing for this process when the settings ask for it; undefined (and nothing registered) otherwise. Call it
 * once, first thing in a main, before any queue or worker is created (they take BullMQ's telemetry at construction).
 * `exporter` replaces the configured one (tests pass an in-memory exporter; spans are then exported one by one).
 */
export function startTracing(
  serviceName: string,
  settings: TracingSettings,
  options: { exporter?: SpanExporter } = {},
): TracingHandle | undefined {
  if (settings.OTEL_SDK_DISABLED === 'true' && !options.exporter) return undefined;
  const chosen = options.exporter ? 'test' : exporterKind(settings);
  if (chosen === 'none') return undefined;
  if (provider) throw new Error('startTracing: tracing is already started in this process');
  const processor: SpanProcessor =
    chosen === 'test'
      ? new SimpleSpanProcessor(options.exporter!)
      : chosen === 'console'
        ? new SimpleSpanProcessor(new ConsoleSpanExporter())
        : new BatchSpanProcessor(new OTLPTraceExporter());
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': settings.OTEL_SERVICE_NAME || serviceName }),
    spanProcessors: [processor],
  });
  // Registers the provider, the AsyncLocalStorage context manager and the W3C trace-context propagator.
  provider.register();
  telemetry = maskedTelemetry(new BullMQOtel({ tracerName: TRACER_NAME }) as unknown as Telemetry);
  const started = provider;
  return {
    async shutdown() {
      if (provider !== started) return;
      provider = undefined;
      telemetry = undefined;
      await started.shutdown();
      // Undo all three of register()'s globals, so that the process (a test worker running file after file) can
      // start tracing again from scratch: a propagator left behind would refuse the next one's.
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

function exporterKind(settings: TracingSettings): 'otlp' | 'console' | 'none' {
  const named = settings.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (named === 'console') return 'console';
  if (named === 'none') return 'none';
  const endpoint = settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || settings.OTEL_EXPORTER_OTLP_ENDPOINT;
  return endpoint ? 'otlp' : 'none';
}

/** BullMQ's `telemetry` option for a Queue or Worker: set while tracing, absent otherwise. */
export function queueTelemetry(): { telemetry?: Telemetry } {
  return telemetry ? { telemetry } : {};
}

/**
 * Run `fn` in a span named `name` (the active one while `fn` runs, so spans it starts are its children); without
 * tracing, `fn(undefined)` at once. A thrown error marks the span failed with its code, never its message (which may
 * quote record fields).
 */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  if (!provider) return fn(undefined);
  return trace.getTracer(TRACER_NAME).startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      markFailed(span, e);
      throw e;
    } finally {
      span.end();
    }
  });
}

/** {@link inSpan} for synchronous work (decryption). */
export function inSpanSync<T>(name: string, attributes: Attributes, fn: (span: Span | undefined) => T): T {
  if (!provider) return fn(undefined);
  return trace.getTracer(TRACER_NAME).startActiveSpan(name, { attributes }, (span) => {
    try {
      return fn(span);
    } catch (e) {
      markFailed(span, e);
      throw e;
    } finally {
      span.end();
    }
  });
}

/** The span of the code running now (a job's process span inside a worker), when tracing. */
export function activeSpan(): Span | undefined {
  return provider ? trace.getActiveSpan() : undefined;
}

/** The context to carry into work done later on someone else's behalf (a batch); undefined without tracing. */
export function captureContext(): Context | undefined {
  return provider ? context.active() : undefined;
}

/** Run `fn` in a context from {@link captureContext} (as is, without one). */
export function withContext<T>(ctx: Context | undefined, fn: () => T): T {
  return ctx ? context.with(ctx, fn) : fn();
}

/** The attributes that name an event on every span about it: kind, order numbers and state (never amounts). */
export function orderAttributes(event: {
  kind: string;
  orderNo: string;
  merchantOrderNo: string;
  state: number;
}): Attributes {
  return {
    'mcb.kind': event.kind,
    'mcb.order_no': event.orderNo,
    'mcb.merchant_order_no': event.merchantOrderNo,
    'mcb.state': event.state,
  };
}

/** Mark `span` failed: `error.code` (an AppError's code, else the error's class name), no message. */
export function markFailed(span: Span | undefined, e: unknown): void {
  if (!span) return;
  const code =
    e instanceof AppError
      ? e.code
      : e instanceof Error
        ? e.cause instanceof AppError
          ? e.cause.code
          : e.name
        : 'Error';
  span.setAttribute('error.code', code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}
