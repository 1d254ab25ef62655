import { createRedis, type Redis } from '@mcb/core/redis';
import {
  InMemorySpanExporter,
  queueTelemetry,
  startTracing,
  type ReadableSpan,
  type TracingHandle,
} from '@mcb/core/tracing';
import { maskNumbers, maskText } from '../src/tracing-bullmq.ts';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { Queue, SpanKind, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// BullMQ copies a job's return value and its failure message into the process span. Whatever the application put
// there (a review's reason quotes both amounts) reaches the trace with every number masked; BullMQ's identifiers do not.
const env = useTestEnv();
const exporter = new InMemorySpanExporter();
let tracing: TracingHandle | undefined;
let connection: Redis;
let queue: Queue;
let worker: Worker;

const REASON = 'Get order reports 777.55, the callback 9999.01';

beforeAll(async () => {
  tracing = startTracing('mask-test', {}, { exporter });
  connection = createRedis(env.redisUrl, 'worker');
  queue = new Queue('masked', { connection, prefix: env.prefix, ...queueTelemetry() });
  worker = new Worker(
    'masked',
    async (job) => {
      if (job.name === 'fails') throw new Error('Get order refused: 40417 amount 9,999.01 above the limit');
      return { status: 'review', code: 'VERIFY_AMOUNT_MISMATCH', reason: REASON, reviewId: 4242 };
    },
    { connection, prefix: env.prefix, ...queueTelemetry() },
  );
});
afterAll(async () => {
  await worker?.close();
  await queue?.close();
  await connection?.quit();
  await tracing?.shutdown();
});

/** The finished process span of job `id`, once BullMQ has ended it. */
function processSpan(id: string): Promise<ReadableSpan> {
  return waitFor(
    () => exporter.getFinishedSpans().find((s) => s.name === 'process masked' && s.attributes['bullmq.job.id'] === id),
    {
      message: `no process span for ${id}`,
    },
  );
}

describe('the text BullMQ copies into spans', () => {
  it('keeps the outcome of a job result readable (and parseable) with its amounts masked', async () => {
    const job = await queue.add('completes', { any: 'data' }, { jobId: 'payin-PI7775-6' });
    const span = await processSpan(job.id!);
    expect(span.attributes['bullmq.job.id']).toBe('payin-PI7775-6'); // identifiers as they are
    const completed = span.events.find((e) => e.name === 'job completed')!;
    const text = String(completed.attributes!['bullmq.job.result']);
    expect(text).not.toMatch(/777|9999|4242/);
    expect(JSON.parse(text)).toEqual({
      status: 'review',
      code: 'VERIFY_AMOUNT_MISMATCH',
      reason: 'Get order reports #, the callback #',
      reviewId: '#',
    });
    // The job itself keeps its return value: the dashboard and the console's timeline read it from Redis.
    expect((await queue.getJob(job.id!))!.returnvalue).toMatchObject({ reason: REASON });
  });

  it('masks the numbers of a failure message', async () => {
    const job = await queue.add('fails', {}, { jobId: 'fails-1', attempts: 1 });
    const span = await processSpan(job.id!);
    const failed = span.events.find((e) => e.name === 'job failed')!;
    expect(failed.attributes!['bullmq.job.failed.reason']).toBe('Get order refused: # amount # above the limit');
    expect((await queue.getJob(job.id!))!.failedReason).toContain('9,999.01');
  });

  it('masks free text in attributes and exceptions, and leaves the other attributes alone', () => {
    const telemetry = queueTelemetry().telemetry!;
    const span = telemetry.tracer.startSpan('direct', { kind: SpanKind.INTERNAL });
    span.setAttributes({
      'bullmq.job.id': 'payout-PO12-5',
      'bullmq.job.progress': '{"paid":"9999.01"}',
      'bullmq.job.attempts.made': 3,
    });
    span.setAttribute('bullmq.job.result', '777.55');
    span.recordException(new Error('lost 777.55'));
    span.recordException('lost 9999.01');
    span.addEvent('job stalled', {
      'bullmq.job.id': 'payin-PI12-6',
      'some.future.data': '{"amount":"777.55"}',
      'some.count': 777.55,
    });
    span.end();
    const done = exporter.getFinishedSpans().find((s) => s.name === 'direct')!;
    expect(done.attributes).toMatchObject({
      'bullmq.job.id': 'payout-PO12-5',
      'bullmq.job.progress': '{"paid":"#"}',
      'bullmq.job.attempts.made': 3,
      'bullmq.job.result': '#',
    });
    const exceptions = done.events.filter((e) => e.name === 'exception').map((e) => e.attributes);
    expect(exceptions).toHaveLength(2);
    expect(JSON.stringify(exceptions)).not.toMatch(/777|9999/);
    expect(exceptions[0]).toMatchObject({ 'exception.message': 'lost #' });
    // Any event: its values masked (a number dropped), BullMQ's identifiers kept.
    expect(done.events.find((e) => e.name === 'job stalled')!.attributes).toEqual({
      'bullmq.job.id': 'payin-PI12-6',
      'some.future.data': '{"amount":"#"}',
    });
  });

  it('masks every number format, and keeps JSON parseable', () => {
    expect(maskNumbers('777.55, 9,999.01, 7775.5000, 1e3, 0.1')).toBe('#, #, #, #e#, #');
    expect(maskText('{"a":12.5,"b":["x 3"],"c":null,"d":true}')).toBe('{"a":"#","b":["x #"],"c":null,"d":true}');
    expect(maskText('{not json 12}')).toBe('{not json #}');
    expect(maskText('"9999.01"')).toBe('"#"');
  });
});
