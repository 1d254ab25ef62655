import { decimalEquals } from '@mcb/core/money';
import {
  InMemorySpanExporter,
  queueTelemetry,
  startTracing,
  tracingEnabled,
  type ReadableSpan,
  type TracingHandle,
} from '@mcb/core/tracing';
import { useTestEnv, waitFor } from '@mcb/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPipeline, type Pipeline } from './helpers/pipeline.ts';

// One trace per callback, ingest → queue → worker → Postgres, exported to memory: the spans cover receiving,
// decrypting and enqueueing at ingest, the job's attempt, Get order and the commit (or the review), name the order
// and its outcome, and never carry an amount, the body or a key.
describe('one trace per callback, from ingest to the commit', () => {
  const env = useTestEnv();
  const exporter = new InMemorySpanExporter();
  let tracing: TracingHandle | undefined;
  let p: Pipeline;

  beforeAll(async () => {
    tracing = startTracing('mcb-e2e', {}, { exporter });
    p = await startPipeline(env);
  });
  afterAll(async () => {
    await p?.close();
    await tracing?.shutdown();
  });

  const attr = (s: ReadableSpan, name: string) => s.attributes[name];
  /** Every span of the trace that received `orderNo`'s callback. */
  async function traceOf(orderNo: string, last: string): Promise<ReadableSpan[]> {
    let spans: ReadableSpan[] = [];
    await waitFor(
      () => {
        const receive = exporter
          .getFinishedSpans()
          .find((s) => s.name === 'callback receive' && attr(s, 'mcb.order_no') === orderNo);
        if (!receive) return false;
        spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === receive.spanContext().traceId);
        return (
          spans.some((s) => s.name === last) &&
          spans.some((s) => s.name.startsWith('process ') && attr(s, 'mcb.outcome') !== undefined)
        );
      },
      { message: `no complete trace for ${orderNo}` },
    );
    return spans;
  }

  /**
   * No span, attribute, event or status of `spans` holds one of `amounts` in any format the code may print it in
   * (the worker's reasons print normalised decimals: 777.55 and 7775.5, not the 777.550 or "7775.50" a record
   * carried), nor a body, nor `secrets` as written.
   */
  function expectNothingSecret(spans: ReadableSpan[], amounts: string[], secrets: string[] = []): void {
    for (const s of spans) {
      const text = JSON.stringify({
        name: s.name,
        attributes: s.attributes,
        events: s.events.map((e) => [e.name, e.attributes]),
        status: s.status,
      });
      // Every number written in the span, grouping commas dropped, compared by value with each amount.
      for (const [written] of text.matchAll(/\d+(?:[.,]\d+)*/g)) {
        const value = written.replace(/,/g, '');
        for (const amount of amounts)
          expect(decimalEquals(value, amount), `${s.name} carries ${written} (the amount ${amount})`).toBe(false);
      }
      for (const secret of secrets) expect(text, `${s.name} carries ${secret}`).not.toContain(secret);
      expect(text).not.toMatch(/encryptedData|BEGIN (RSA )?PRIVATE KEY/);
    }
  }

  it('covers ingest, the job and the commit of a credited pay-in, with the order number and outcome and without the amount or body', async () => {
    expect(tracingEnabled()).toBe(true);
    await p.registerPayin('TRACE-1', '4321.09');
    const order = p.sim.createPayin({ merchantOrderNo: 'TRACE-1', currency: 'INR', amount: '4321.09' });
    const [delivery] = p.sim.finalize(order.orderNo, 6).deliveries;
    expect((await p.sim.settled(delivery!)).status).toBe('delivered');
    await waitFor(async () => (await p.orderState('TRACE-1')).status === 'credited', { message: 'not credited' });

    const spans = await traceOf(order.orderNo, 'settlement commit');
    const names = spans.map((s) => s.name);
    for (const name of [
      'callback receive',
      'callback decrypt',
      'callback enqueue',
      'add callbacks.payin',
      'process callbacks',
      'platform get order',
      'settlement commit',
    ]) {
      expect(names, `span ${name} in ${JSON.stringify(names)}`).toContain(name);
    }
    const receive = spans.find((s) => s.name === 'callback receive')!;
    expect(receive.parentSpanContext).toBeUndefined(); // the root: one trace per callback
    expect(receive.attributes).toMatchObject({
      'mcb.kind': 'payin',
      'mcb.order_no': order.orderNo,
      'mcb.merchant_order_no': 'TRACE-1',
      'mcb.state': 6,
      'mcb.outcome': 'success',
    });
    // The micro-batched add runs in the context of the request it came from, whichever request started the batch.
    const enqueue = spans.find((s) => s.name === 'callback enqueue')!;
    expect(spans.find((s) => s.name === 'add callbacks.payin')!.parentSpanContext?.spanId).toBe(
      enqueue.spanContext().spanId,
    );
    const job = spans.find((s) => s.name === 'process callbacks')!;
    expect(job.attributes).toMatchObject({
      'mcb.order_no': order.orderNo,
      'mcb.outcome': 'credited',
      'mcb.attempt': 1,
    });
    const commit = spans.find((s) => s.name === 'settlement commit')!;
    expect(commit.attributes).toMatchObject({ 'mcb.commit_result': 'applied', 'mcb.outcome': 'credited' });
    expect(commit.parentSpanContext?.spanId).toBe(job.spanContext().spanId);
    expect(spans.find((s) => s.name === 'platform get order')!.attributes).toMatchObject({ 'mcb.confirmed_state': 6 });
    expectNothingSecret(spans, ['4321.09', order.quantity!], [p.publicKeyPem.slice(30, 60)]);
  });

  it("shows the review that stopped a forged callback, in that callback's own trace, without either amount", async () => {
    await p.registerPayin('TRACE-2', '777.55');
    const order = p.sim.createPayin({ merchantOrderNo: 'TRACE-2', currency: 'INR', amount: '777.55' });
    p.sim.finalize(order.orderNo, 3);
    const forged = p.sim.forge({ what: 'amount', ref: order.orderNo }); // claims ten times the amount
    expect((await p.sim.settled(forged)).status).toBe('delivered');
    const spans = await traceOf(order.orderNo, 'settlement review');
    expect(spans.find((s) => s.name === 'settlement review')!.attributes).toMatchObject({
      'mcb.review_code': 'VERIFY_AMOUNT_MISMATCH',
      'mcb.review_opened': true,
    });
    const job = spans.find((s) => s.name === 'process callbacks')!;
    expect(job.attributes['mcb.outcome']).toBe('review');
    expect(spans.map((s) => s.name)).not.toContain('settlement commit');
    // The forgery claims 7775.50, which the worker's reason prints as 7775.5.
    expectNothingSecret(spans, ['777.55', '7775.5']);
    // BullMQ's "job completed" event still tells the outcome: the job's return value with its numbers masked.
    const completed = job.events.find((e) => e.name === 'job completed');
    expect(JSON.parse(String(completed?.attributes?.['bullmq.job.result']))).toMatchObject({
      status: 'review',
      code: 'VERIFY_AMOUNT_MISMATCH',
      reason: 'Get order reports #, the callback #',
    });
  });

  it('is off unless asked for: no endpoint and no console exporter start nothing', () => {
    expect(startTracing('x', {})).toBeUndefined();
    expect(
      startTracing('x', { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }),
    ).toBeUndefined();
    expect(
      startTracing('x', { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }),
    ).toBeUndefined();
    expect(Object.keys(queueTelemetry())).toEqual(['telemetry']); // this file's tracing, still on
    // A second start in one process is a programming error, said at once rather than silently replacing the first.
    expect(() => startTracing('x', {}, { exporter: new InMemorySpanExporter() })).toThrow(/already started/);
  });
});
