import { context, propagation } from '@opentelemetry/api';
import { InMemorySpanExporter, inSpan, startTracing, tracingEnabled } from '@mcb/core/tracing';
import { describe, expect, it } from 'vitest';

// startTracing registers three process-wide OpenTelemetry globals (tracer provider, context manager, propagator).
// Its shutdown must undo all three: a process that runs one piece after another (a test worker running file after
// file) starts tracing again, and a propagator left behind refuses the next one's registration.
describe('tracing, shut down', () => {
  it('leaves no OpenTelemetry global behind, so the same process can trace and propagate again', async () => {
    const first = startTracing('first', {}, { exporter: new InMemorySpanExporter() })!;
    expect(propagation.fields()).toContain('traceparent');
    await first.shutdown();
    expect(tracingEnabled()).toBe(false);
    expect(propagation.fields()).toEqual([]);

    const exporter = new InMemorySpanExporter();
    const second = startTracing('second', {}, { exporter })!;
    try {
      const carrier: Record<string, string> = {};
      const traceId = await inSpan('again', {}, async (span) => {
        propagation.inject(context.active(), carrier);
        return span!.spanContext().traceId;
      });
      expect(carrier.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
      expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['again']);
    } finally {
      await second.shutdown();
    }
    expect(propagation.fields()).toEqual([]);
  });
});
