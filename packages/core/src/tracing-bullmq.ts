/**
 * BullMQ's telemetry without the free text it copies into spans. BullMQ writes a job's return value
 * (`bullmq.job.result` on the "job completed" event), its failure message (`bullmq.job.failed.reason`), its progress
 * and the messages of errors it records as exceptions. Those are whatever the application put there: a review's
 * reason quotes both amounts ("Get order reports 777.55, the callback 9999.01"), a platform refusal quotes the
 * platform's message. Traces never carry amounts, so every number in that text is masked (`#`) before it reaches a
 * span: the words, codes and statuses stay readable ("review", "VERIFY_AMOUNT_MISMATCH", "Get order reports #"),
 * and no amount can pass in any format. BullMQ's own identifiers (job id, queue, worker) are left as they are.
 */
import type { Attributes, AttributeValue, Exception, Span, Telemetry, Time, Tracer } from 'bullmq';

/** Attributes whose value is text BullMQ takes from the application (return value, failure, progress). */
const FREE_TEXT = new Set(['bullmq.job.result', 'bullmq.job.failed.reason', 'bullmq.job.progress']);
/** BullMQ's identifiers: never masked, even in an event (the "job stalled" event names the job). */
const IDENTIFIERS = new Set([
  'bullmq.job.id',
  'bullmq.job.ids',
  'bullmq.job.key',
  'bullmq.job.name',
  'bullmq.queue.name',
  'bullmq.worker.id',
  'bullmq.worker.name',
]);

/** Every run of digits (with its decimal or grouping separators) becomes `#`: `777.55`, `9,999.01`, `5E3` → `#`, `#`, `#E#`. */
export function maskNumbers(text: string): string {
  return text.replace(/\d+(?:[.,]\d+)*/g, '#');
}

function maskJson(value: unknown): unknown {
  if (typeof value === 'string') return maskNumbers(value);
  if (typeof value === 'number') return '#';
  if (Array.isArray(value)) return value.map(maskJson);
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [maskNumbers(k), maskJson(v)]));
  return value;
}

/**
 * {@link maskNumbers} for a text that may be JSON (BullMQ stringifies a return value): JSON stays JSON, its numbers
 * and the numbers in its strings replaced by `"#"` and `#`, so a reader can still parse the outcome.
 */
export function maskText(text: string): string {
  if (/^\s*[[{]/.test(text)) {
    try {
      return JSON.stringify(maskJson(JSON.parse(text)));
    } catch {
      // not JSON after all: masked as text
    }
  }
  return maskNumbers(text);
}

/** A free-text value masked; a number in an event (none is BullMQ's today) is dropped rather than guessed about. */
function maskValue(value: AttributeValue): AttributeValue | undefined {
  if (typeof value === 'string') return maskText(value);
  if (typeof value === 'number') return undefined;
  if (Array.isArray(value))
    return value.map((v) => (typeof v === 'string' ? maskText(v) : typeof v === 'number' ? null : v)) as AttributeValue;
  return value;
}

/** `attributes` with the free-text ones masked; with `all`, every value but BullMQ's identifiers (an event's). */
function maskAttributes(attributes: Attributes | undefined, all: boolean): Attributes | undefined {
  if (!attributes) return attributes;
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) {
    const masked = FREE_TEXT.has(key) || (all && !IDENTIFIERS.has(key));
    const kept = value !== undefined && masked ? maskValue(value) : value;
    if (kept !== undefined) out[key] = kept;
  }
  return out;
}

/** An exception's message masked; its stack dropped (its first line is the message). */
function maskException(exception: Exception): Exception {
  if (typeof exception === 'string') return maskNumbers(exception);
  const { stack: _stack, message, ...rest } = exception;
  return (message === undefined ? rest : { ...rest, message: maskNumbers(message) }) as Exception;
}

class MaskedSpan implements Span {
  readonly #span: Span;
  constructor(span: Span) {
    this.#span = span;
  }
  setSpanOnContext(ctx: unknown): unknown {
    return this.#span.setSpanOnContext(ctx);
  }
  setAttribute(key: string, value: AttributeValue): void {
    const kept = FREE_TEXT.has(key) ? maskValue(value) : value;
    if (kept !== undefined) this.#span.setAttribute(key, kept);
  }
  setAttributes(attributes: Attributes): void {
    this.#span.setAttributes(maskAttributes(attributes, false)!);
  }
  // Events are where BullMQ puts application text (the result, the failure): all of an event's values are masked,
  // but its identifiers, so that a future BullMQ adding application data to an event is covered too.
  addEvent(name: string, attributes?: Attributes): void {
    this.#span.addEvent(name, maskAttributes(attributes, true));
  }
  recordException(exception: Exception, time?: Time): void {
    this.#span.recordException(maskException(exception), time);
  }
  end(): void {
    this.#span.end();
  }
}

/** `inner` (bullmq-otel's), with every span it starts masking the free text BullMQ writes into it. */
export function maskedTelemetry(inner: Telemetry): Telemetry {
  const tracer: Tracer = {
    startSpan: (name, options, context) => new MaskedSpan(inner.tracer.startSpan(name, options, context)),
  };
  return { ...inner, tracer, contextManager: inner.contextManager };
}
