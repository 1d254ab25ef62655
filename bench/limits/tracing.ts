/**
 * What the tracing helpers cost a callback while tracing is off (no OTEL_EXPORTER_OTLP_ENDPOINT): the exact calls
 * ingest makes per callback (receive, decrypt and enqueue spans, the context carried into the batch), timed against
 * the same work without them. An ingest peak comparison cannot show a cost this small on a shared machine (its
 * run-to-run noise is tens of percent); this measures it directly.
 */
import { captureContext, inSpan, inSpanSync, tracingEnabled, withContext } from '@mcb/core/tracing';

export interface TracingOffCost {
  /** Nanoseconds the helpers add to one callback. */
  nsPerCallback: number;
  iterations: number;
}

const work = () => 1;

async function timed(iterations: number, once: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) await once();
  return Number(process.hrtime.bigint() - t0) / iterations;
}

export async function measureTracingOff(iterations = 500_000): Promise<TracingOffCost> {
  if (tracingEnabled()) throw new Error('measureTracingOff: tracing is on in this process');
  const withHelpers = () =>
    inSpan('callback receive', {}, async () => {
      inSpanSync('callback decrypt', {}, work);
      await inSpan('callback enqueue', {}, async () => withContext(captureContext(), work));
    });
  const without = async () => {
    work();
    await (async () => work())();
  };
  // Warm both paths, then take the better of three runs of each (the machine is shared).
  await timed(50_000, withHelpers);
  await timed(50_000, without);
  let best = Infinity;
  for (let r = 0; r < 3; r++)
    best = Math.min(best, (await timed(iterations, withHelpers)) - (await timed(iterations, without)));
  return { nsPerCallback: Math.max(0, best), iterations };
}
