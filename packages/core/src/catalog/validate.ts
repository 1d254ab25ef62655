import { decimalPlaces, isDecimalString, isPositiveDecimal } from '../money.ts';
import { compilePattern } from './pattern.ts';
import type { Catalog, FieldEntry, MethodEntry } from './schema.ts';

/** A payout as the merchant describes it; `params` are keyed by the catalog fields' `key`. */
export interface PayoutInput {
  /** Fiat currency code, as the catalog spells it. */
  currency: string;
  /** Decimal string, e.g. "1500.50"; never a float. */
  amount: string;
  /** The catalog's method number. */
  paymentMethod: number;
  /** Field values keyed by the catalog field's `key` (and `bankName` when the method lists banks but has no field). */
  params: Record<string, string>;
}

/** One problem, naming the request field it is about (`currency`, `amount`, `paymentMethod`, `params.<key>`). */
export interface PayoutProblem {
  field: string;
  message: string;
}

export type PayoutValidation = { ok: true; apiParams: Record<string, string> } | { ok: false; errors: PayoutProblem[] };

/** The create-payout parameter that must name one of `banks[]` (spec: Method entry). */
export const BANK_NAME_PARAM = 'bankName';
/** Longest field value accepted; catalog fields are names and account numbers. */
export const MAX_PARAM_LENGTH = 1024;

const isBlank = (v: string | undefined): v is undefined => v === undefined || v.trim() === '';
const describe = (f: FieldEntry) => (f.label ? `${f.label} (${f.key})` : f.key);
const withHint = (message: string, f: FieldEntry) => (f.hint ? `${message}; hint: ${f.hint}` : message);

/**
 * Validate a payout against the catalog and return every problem at once, each naming its field. On success,
 * the create-payout parameters keyed by `apiParam`. Never throws for bad input or a bad catalog pattern.
 */
export function validatePayout(catalog: Catalog, input: PayoutInput): PayoutValidation {
  const errors: PayoutProblem[] = [];
  const amountOk = checkAmount(input.amount, errors);

  const entry = catalog.currencies.find((c) => c.currency === input.currency);
  if (!entry) {
    const enabled = catalog.currencies.map((c) => c.currency).join(', ') || 'none';
    errors.push({
      field: 'currency',
      message: `currency ${input.currency} is not enabled for this merchant (enabled: ${enabled})`,
    });
    return { ok: false, errors };
  }
  if (amountOk && decimalPlaces(input.amount) > entry.decimals) {
    errors.push({
      field: 'amount',
      message:
        `${entry.currency} allows at most ${entry.decimals} decimal place${entry.decimals === 1 ? '' : 's'}; ` +
        `got ${decimalPlaces(input.amount)}`,
    });
  }

  const method = entry.methods.find((m) => m.paymentMethod === input.paymentMethod);
  if (!method) {
    const offered = entry.methods.map((m) => `${m.paymentMethod} ${m.name}`).join(', ') || 'none';
    errors.push({
      field: 'paymentMethod',
      message: `method ${input.paymentMethod} is not offered for ${entry.currency} (offered: ${offered})`,
    });
    return { ok: false, errors };
  }

  const apiParams = checkParams(method, input.params, errors);
  return errors.length === 0 ? { ok: true, apiParams } : { ok: false, errors };
}

function checkAmount(amount: string, errors: PayoutProblem[]): boolean {
  if (!isDecimalString(amount)) {
    errors.push({ field: 'amount', message: 'amount must be a decimal string such as "100" or "100.50"' });
    return false;
  }
  if (!isPositiveDecimal(amount)) {
    errors.push({ field: 'amount', message: 'amount must be greater than zero' });
    return false;
  }
  return true;
}

function checkParams(
  method: MethodEntry,
  params: Record<string, string>,
  errors: PayoutProblem[],
): Record<string, string> {
  const apiParams: Record<string, string> = {};
  const sourceOf = new Map<string, string>();
  const known = new Set(method.fields.map((f) => f.key));
  const bankField = method.fields.find((f) => f.apiParam === BANK_NAME_PARAM);

  for (const f of method.fields) {
    const field = `params.${f.key}`;
    const value = Object.hasOwn(params, f.key) ? params[f.key] : undefined;
    if (f.apiParam === '') {
      if (f.required) {
        errors.push({
          field,
          message:
            `${describe(f)} is required by method ${method.paymentMethod} but has no apiParam: ` +
            'it cannot be sent through the API, so this method cannot be used for API payouts',
        });
      } else if (!isBlank(value)) {
        errors.push({
          field,
          message: `${describe(f)} has no apiParam: it cannot be sent through the API; leave it out`,
        });
      }
      continue;
    }
    if (isBlank(value)) {
      if (f.required) errors.push({ field, message: withHint(`${describe(f)} is required`, f) });
      continue;
    }
    if (!checkValue(f, value, field, errors)) continue;
    if (f === bankField && method.banks !== undefined && !checkBank(method, value, field, errors)) continue;

    const previous = sourceOf.get(f.apiParam);
    if (previous !== undefined && apiParams[f.apiParam] !== value) {
      errors.push({
        field,
        message: `${describe(f)} and ${previous} both map to apiParam ${f.apiParam} with different values`,
      });
      continue;
    }
    sourceOf.set(f.apiParam, f.key);
    apiParams[f.apiParam] = value;
  }

  // The method lists banks but no field carries bankName: the request still needs one chosen from the list.
  if (method.banks !== undefined && !bankField) {
    known.add(BANK_NAME_PARAM);
    const field = `params.${BANK_NAME_PARAM}`;
    const value = Object.hasOwn(params, BANK_NAME_PARAM) ? params[BANK_NAME_PARAM] : undefined;
    if (isBlank(value)) {
      errors.push({
        field,
        message: `bankName is required: method ${method.paymentMethod} lists the banks to choose from`,
      });
    } else if (value.length <= MAX_PARAM_LENGTH && checkBank(method, value, field, errors)) {
      apiParams[BANK_NAME_PARAM] = value;
    } else if (value.length > MAX_PARAM_LENGTH) {
      errors.push({ field, message: `bankName is longer than ${MAX_PARAM_LENGTH} characters` });
    }
  }

  for (const key of Object.keys(params)) {
    if (known.has(key)) continue;
    const byApiParam = method.fields.find((f) => f.apiParam === key && f.key !== '');
    const suggestion = byApiParam ? `; ${key} is the apiParam of field ${byApiParam.key}: send it under that key` : '';
    errors.push({
      field: `params.${key}`,
      message: `${key} is not a field of method ${method.paymentMethod} (${method.name})${suggestion}`,
    });
  }
  return apiParams;
}

function checkValue(f: FieldEntry, value: string, field: string, errors: PayoutProblem[]): boolean {
  if (value.length > MAX_PARAM_LENGTH) {
    errors.push({ field, message: `${describe(f)} is longer than ${MAX_PARAM_LENGTH} characters` });
    return false;
  }
  if (f.pattern === '') return true;
  const compiled = compilePattern(f.pattern);
  if (!compiled.ok) {
    errors.push({
      field,
      message:
        `the catalog's pattern for ${describe(f)} is unusable (${compiled.reason}), so the value cannot be checked; ` +
        'ask the platform to fix the pattern',
    });
    return false;
  }
  if (!compiled.test(value)) {
    errors.push({ field, message: withHint(`${describe(f)} does not match the required pattern ${f.pattern}`, f) });
    return false;
  }
  return true;
}

function checkBank(method: MethodEntry, value: string, field: string, errors: PayoutProblem[]): boolean {
  const banks = method.banks ?? [];
  if (banks.some((b) => b.name === value)) return true;
  const byCode = banks.find((b) => b.code === value);
  const message =
    banks.length === 0
      ? `method ${method.paymentMethod} lists no selectable banks, so no bankName can be accepted`
      : byCode
        ? `bankName ${value} is a bank code; send the bank's name (${byCode.name})`
        : `bankName ${value} is not among the ${banks.length} banks of method ${method.paymentMethod} ` +
          '(see GET /api/payment-methods)';
  errors.push({ field, message });
  return false;
}
