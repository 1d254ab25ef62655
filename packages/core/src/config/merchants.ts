/**
 * The merchant numbers one deployment serves (docs/merchants.md). Either `MERCHANTS_FILE` lists them, or today's
 * `MERCHANT_NO` + `MERCHANT_PRIVATE_KEY_FILE` make one merchant, ref `default`, on the legacy routes. Every process
 * reads the list once at start through {@link loadConfig}; the rest of the code receives `config.merchants` and
 * never reads `MERCHANT_NO` again.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { optionalString, type ValuesOf } from './fields.ts';
import type { AppRole } from './role.ts';

/** The ref of the merchant that `MERCHANT_NO` makes (and whose Redis keys are today's names). */
export const DEFAULT_MERCHANT_REF = 'default';
/** How many merchant numbers one deployment serves at most. */
export const MAX_MERCHANTS = 64;
/** A ref: the route segment, the metric label and part of the queue name. */
export const MERCHANT_REF_PATTERN = /^[a-z0-9-]{1,32}$/;

/** One merchant number the deployment serves, as every process sees it. */
export interface Merchant {
  /** `[a-z0-9-]{1,32}`, unique: `/callbacks/m/{ref}`, the `merchant` metric label, the queue name's part. */
  readonly ref: string;
  /** Our number on the platform: callbacks must carry it, Get order and the catalog ask with it. */
  readonly merchantNo: string;
  /** PEM files of its private keys, current first (the rest are tried during a rotation). Ingest reads them. */
  readonly privateKeyFiles: readonly string[];
  /** Its platform's `{base_url}`; undefined means `PLATFORM_BASE_URL`. */
  readonly platformBaseUrl: string | undefined;
  /** Its own fleet-wide Get order budget, requests per second; undefined means `PLATFORM_MAX_RPS`. */
  readonly getOrderRps: number | undefined;
  /** Its share of what merchants share (event loop, Postgres pool, group commit) under contention. */
  readonly weight: number;
  /** Whether `/callbacks`, `/callbacks/payin` and `/callbacks/payout` serve it (at most one merchant). */
  readonly legacyRoutes: boolean;
}

/** The merchants area of the config schema (composed in index.ts). */
export const merchantsFields = {
  /**
   * JSON file `{"merchants": [{ref, merchantNo, privateKeyFiles, platformBaseUrl?, getOrderRps?, weight?,
   * legacyRoutes?}]}`: the merchant numbers this deployment serves (docs/merchants.md). Unset: MERCHANT_NO and
   * MERCHANT_PRIVATE_KEY_FILE make one merchant, `default`.
   */
  MERCHANTS_FILE: optionalString,
};

const entrySchema = z.strictObject({
  ref: z.string().regex(MERCHANT_REF_PATTERN, 'expected 1 to 32 of a-z, 0-9 and -'),
  merchantNo: z.string().trim().min(1, 'expected a non-empty merchant number'),
  privateKeyFiles: z.array(z.string().trim().min(1, 'expected a file path')).min(1, 'expected at least one PEM file'),
  platformBaseUrl: z
    .url({ protocol: /^https?$/, message: 'expected an http(s) URL' })
    .transform((u) => u.replace(/\/+$/, ''))
    .optional(),
  getOrderRps: z.number().positive('expected a number of requests per second above 0').optional(),
  weight: z
    .number()
    .int('expected a whole number')
    .min(1, 'expected 1 or more')
    .max(100, 'expected 100 or less')
    .default(1),
  legacyRoutes: z.boolean().default(false),
});

const fileSchema = z.strictObject({
  merchants: z
    .array(z.unknown())
    .min(1, 'expected at least one merchant')
    .max(MAX_MERCHANTS, `expected at most ${MAX_MERCHANTS} merchants`),
});

/** How an entry is named in an error: its position and, when it has a readable one, its ref. */
function entryName(index: number, raw: unknown): string {
  const ref = (raw as { ref?: unknown } | null)?.ref;
  return typeof ref === 'string' && ref.length <= 40 ? `merchants[${index}] ("${ref}")` : `merchants[${index}]`;
}

/** The merchants of a MERCHANTS_FILE's text, or one problem per bad entry or field. */
export function parseMerchantsFile(text: string, file: string): { merchants: Merchant[]; problems: string[] } {
  const where = `MERCHANTS_FILE (${file})`;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return { merchants: [], problems: [`${where}: not JSON (${(e as Error).message})`] };
  }
  const top = fileSchema.safeParse(json);
  if (!top.success) {
    return {
      merchants: [],
      problems: top.error.issues.map((i) => `${where}: ${i.path.join('.') || '(root)'}: ${i.message}`),
    };
  }
  const merchants: Merchant[] = [];
  const problems: string[] = [];
  top.data.merchants.forEach((raw, index) => {
    const parsed = entrySchema.safeParse(raw);
    if (!parsed.success) {
      for (const i of parsed.error.issues) {
        const field = i.path.join('.') || (i.code === 'unrecognized_keys' ? i.keys.join(', ') : '(entry)');
        problems.push(`${where}: ${entryName(index, raw)}.${field}: ${i.message}`);
      }
      return;
    }
    const m = parsed.data;
    merchants.push(
      Object.freeze({
        ref: m.ref,
        merchantNo: m.merchantNo,
        privateKeyFiles: Object.freeze([...m.privateKeyFiles]),
        platformBaseUrl: m.platformBaseUrl,
        getOrderRps: m.getOrderRps,
        weight: m.weight,
        legacyRoutes: m.legacyRoutes,
      }),
    );
  });
  problems.push(...duplicateProblems(merchants, where));
  return { merchants, problems };
}

/** A ref or merchant number used twice, and more than one `legacyRoutes` entry. */
function duplicateProblems(merchants: readonly Merchant[], where: string): string[] {
  const problems: string[] = [];
  for (const field of ['ref', 'merchantNo'] as const) {
    const first = new Map<string, number>();
    merchants.forEach((m, i) => {
      const seen = first.get(m[field]);
      if (seen === undefined) first.set(m[field], i);
      else problems.push(`${where}: merchants[${i}] ("${m.ref}").${field}: the same as merchants[${seen}]'s`);
    });
  }
  const legacy = merchants.filter((m) => m.legacyRoutes).map((m) => `"${m.ref}"`);
  if (legacy.length > 1) {
    problems.push(`${where}: legacyRoutes: at most one merchant may take /callbacks (got ${legacy.join(', ')})`);
  }
  return problems;
}

type MerchantValues = ValuesOf<typeof merchantsFields> & {
  MERCHANT_NO?: string | undefined;
  MERCHANT_PRIVATE_KEY_FILE?: string | undefined;
};

/** The one merchant today's variables make. */
function defaultMerchant(values: MerchantValues): Merchant {
  return Object.freeze({
    ref: DEFAULT_MERCHANT_REF,
    merchantNo: values.MERCHANT_NO ?? '',
    privateKeyFiles: Object.freeze(
      (values.MERCHANT_PRIVATE_KEY_FILE ?? '')
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p !== ''),
    ),
    platformBaseUrl: undefined,
    getOrderRps: undefined,
    weight: 1,
    legacyRoutes: true,
  });
}

/**
 * The merchants the variables name, and the problems that stop a role from starting: MERCHANTS_FILE together with
 * MERCHANT_NO or MERCHANT_PRIVATE_KEY_FILE, an unreadable or invalid file. Without MERCHANTS_FILE the list is the
 * `default` merchant, even when MERCHANT_NO is unset (the role's required variables say so).
 */
export function merchantsOf(values: MerchantValues, role: AppRole): { merchants: Merchant[]; problems: string[] } {
  const file = values.MERCHANTS_FILE;
  if (file === undefined) return { merchants: [defaultMerchant(values)], problems: [] };
  const both = (['MERCHANT_NO', 'MERCHANT_PRIVATE_KEY_FILE'] as const).filter((n) => values[n] !== undefined);
  if (both.length > 0) {
    return {
      merchants: [],
      problems: [
        `MERCHANTS_FILE: set together with ${both.join(' and ')}; list every merchant in the file ` +
          `(ref "${DEFAULT_MERCHANT_REF}" keeps today's queue) and unset ${both.join(' and ')}`,
      ],
    };
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    return {
      merchants: [],
      problems: [`MERCHANTS_FILE: ${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`],
    };
  }
  const parsed = parseMerchantsFile(text, file);
  // Roles that never act for a merchant (the sandbox, an operator's command) still get the list, or an empty one.
  return role === 'sandbox' ? { merchants: parsed.merchants, problems: [] } : parsed;
}

/** The merchant whose ref is `ref`, or undefined (an unknown ref is an outsider's guess: say nothing more). */
export function merchantByRef(merchants: readonly Merchant[], ref: string): Merchant | undefined {
  return merchants.find((m) => m.ref === ref);
}

/** The merchant on the legacy routes (`/callbacks`), if any. */
export function legacyMerchant(merchants: readonly Merchant[]): Merchant | undefined {
  return merchants.find((m) => m.legacyRoutes);
}
