import { isLosslessNumber, parse as parseLossless, type LosslessNumber } from 'lossless-json';
import { z } from 'zod';
import { AppError, ErrorCodes } from '../errors.ts';
import { isDecimalString, normalizeDecimal } from '../money.ts';
import type { CallbackJob } from '../queue/index.ts';
import { FINAL_STATES, type CallbackKind } from '../spec.ts';
import { platformTimeToIso } from './pay-time.ts';

/** States a callback may carry: the spec's final states of its kind (pay-in 3/6, payout 4/5); anything else is refused. */
export const CALLBACK_STATES = FINAL_STATES;

type WithoutEnvelope<T> = T extends unknown ? Omit<T, 'receivedAt' | 'source'> : never;

/**
 * A decrypted, validated record, normalised: the job payload (`callbackJobSchema`) without what ingest adds
 * (`receivedAt`, `source`). Amounts are exact decimal text; times are ISO instants.
 */
export type CallbackRecord = WithoutEnvelope<CallbackJob>;

// OrderNo becomes part of the BullMQ job id, which must not contain ':'; platform numbers are plain tokens.
const orderNo = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected 1-64 letters, digits, "_", "." or "-"');
const token = z.string().regex(/^[\x21-\x7e]{1,128}$/, 'expected 1-128 printable ASCII characters');
const jsonNumber = z.custom<LosslessNumber>((v) => isLosslessNumber(v), 'expected a JSON number');
const int = jsonNumber
  .refine((n) => /^-?\d{1,9}$/.test(n.value), 'expected an integer')
  .transform((n) => Number(n.value));
// Exact decimal text: kept as sent when it is a plain decimal, exponent forms (1e3) spelled out exactly.
const amount = jsonNumber
  .transform((n, ctx) => {
    if (isDecimalString(n.value)) return n.value;
    try {
      return normalizeDecimal(n.value);
    } catch {
      // e.g. 1e1001: out of range. The issue names the field, never the value (it is decrypted text).
      ctx.addIssue({ code: 'custom', message: 'expected a decimal amount with an exponent of at most 1000' });
      return z.NEVER;
    }
  })
  .refine((s) => !s.startsWith('-'), 'expected a non-negative amount');
const payTime = z.string().transform((s, ctx) => {
  const iso = platformTimeToIso(s);
  if (iso === undefined) {
    ctx.addIssue({ code: 'custom', message: 'expected yyyy-MM-ddTHH:mm:ss (UTC+8)' });
    return z.NEVER;
  }
  return iso;
});

/** Field names are lower-cased before validation: the spec says receivers match them case-insensitively. */
const payinSchema = z.object({
  orderno: orderNo,
  merchantno: token,
  merchantorderno: token,
  paytime: payTime,
  orderstate: int,
  quantity: amount,
  fiatcurrency: amount,
});
const payoutSchema = z.object({
  orderno: orderNo,
  merchantno: token,
  merchantorderno: token,
  paytime: z.union([z.null(), z.literal('').transform(() => null), payTime]),
  state: int,
});

function fail(
  code: (typeof ErrorCodes)[keyof typeof ErrorCodes],
  message: string,
  details?: Record<string, unknown>,
): AppError {
  return new AppError(code, message, { details });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Parse plaintext into an object whose keys are lower-cased, numbers kept as LosslessNumber. */
function parseObject(plaintext: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = parseLossless(utf8.decode(plaintext));
  } catch {
    // Never echo the parser's message: it quotes the plaintext around the error position.
    throw fail(ErrorCodes.CALLBACK_JSON_INVALID, 'plaintext is not UTF-8 JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw fail(ErrorCodes.CALLBACK_JSON_INVALID, 'plaintext is not a JSON object');
  }
  const out: Record<string, unknown> = Object.create(null);
  for (const [name, v] of Object.entries(value)) {
    const lower = name.toLowerCase();
    if (lower in out) {
      throw fail(ErrorCodes.CALLBACK_SCHEMA_INVALID, 'a field appears twice (names differ only in case)', {
        field: lower,
      });
    }
    out[lower] = v;
  }
  return out;
}

/** Which kind a record is: pay-in records carry `OrderState`, payout records `state`. */
function kindOf(fields: Record<string, unknown>): CallbackKind {
  const payin = 'orderstate' in fields;
  const payout = 'state' in fields;
  if (payin === payout) {
    throw fail(
      ErrorCodes.CALLBACK_SCHEMA_INVALID,
      payin ? 'record has both OrderState and state' : 'record has no OrderState or state',
    );
  }
  return payin ? 'payin' : 'payout';
}

function schemaError(error: z.ZodError, fields: Record<string, unknown>): AppError {
  const issues = error.issues.map((i) => {
    const field = i.path.join('.');
    return { field, problem: i.path.length === 1 && !(field in fields) ? 'missing' : i.message };
  });
  return fail(
    ErrorCodes.CALLBACK_SCHEMA_INVALID,
    `record fails validation: ${issues.map((i) => `${i.field}: ${i.problem}`).join('; ')}`,
    { issues },
  );
}

/**
 * Parse and validate a decrypted record (lossless JSON, case-insensitive names, zod), and check its state is one the
 * spec defines for its kind. Error messages name fields and problems, never values.
 * @throws AppError CALLBACK_JSON_INVALID | CALLBACK_SCHEMA_INVALID | CALLBACK_STATE_INVALID
 */
export function parseRecord(plaintext: Buffer): CallbackRecord {
  const fields = parseObject(plaintext);
  const kind = kindOf(fields);
  let record: CallbackRecord;
  if (kind === 'payin') {
    const r = payinSchema.safeParse(fields);
    if (!r.success) throw schemaError(r.error, fields);
    const d = r.data;
    record = {
      kind,
      orderNo: d.orderno,
      merchantNo: d.merchantno,
      merchantOrderNo: d.merchantorderno,
      state: d.orderstate,
      payTime: d.paytime,
      quantity: d.quantity,
      fiatAmount: d.fiatcurrency,
    };
  } else {
    const r = payoutSchema.safeParse(fields);
    if (!r.success) throw schemaError(r.error, fields);
    const d = r.data;
    record = {
      kind,
      orderNo: d.orderno,
      merchantNo: d.merchantno,
      merchantOrderNo: d.merchantorderno,
      state: d.state,
      payTime: d.paytime,
    };
  }
  if (!CALLBACK_STATES[kind].includes(record.state)) {
    throw fail(ErrorCodes.CALLBACK_STATE_INVALID, `state ${record.state} is not a ${kind} state the spec defines`, {
      kind,
      state: record.state,
      orderNo: record.orderNo,
    });
  }
  return record;
}
