import { z } from 'zod';

/**
 * The payment-method catalog exactly as the spec's tables describe it ("Payment-method catalog"). Every listed
 * field is required except `banks[]` ("when it is present"); fields the spec does not list are ignored (zod strips
 * them), so a platform that adds a field does not break us, while one that drops a required field is an error.
 */

/** Field entry: one item of information a payout with this method needs (element of `fields[]`). */
export const fieldEntrySchema = z.object({
  /** Field identifier; payout `params` are keyed by it. */
  key: z.string(),
  /** Name of the create-payout parameter; empty means the item cannot be passed through the API. */
  apiParam: z.string(),
  /** Field name, in English. */
  label: z.string(),
  /** Whether the item is mandatory. */
  required: z.boolean(),
  /** Regular expression the value must match; empty means no restriction. Compiled with RE2, never RegExp. */
  pattern: z.string(),
  /** Filling hint. */
  hint: z.string(),
});

/** A selectable bank (element of `banks[]`). */
export const bankEntrySchema = z.object({
  name: z.string(),
  code: z.string(),
});

/** Method entry: one collection method for payouts in a currency (element of `methods[]`). */
export const methodEntrySchema = z.object({
  /** Method number, passed as `paymentMethod` when creating a payout. */
  paymentMethod: z.number().int(),
  /** Method name, in English. */
  name: z.string(),
  /** `bank` (bank transfer), `wallet` (e-wallet) or `qrcode` (QR-code scan). */
  kind: z.enum(['bank', 'wallet', 'qrcode']),
  fields: z.array(fieldEntrySchema),
  /** When present, the payout's `bankName` must be one of these names. `null` is read as absent. */
  banks: z
    .array(bankEntrySchema)
    .nullish()
    .transform((v) => v ?? undefined),
});

/** Currency entry: one enabled fiat currency (element of `data.currencies[]`). */
export const currencyEntrySchema = z.object({
  /** Fiat currency code. */
  currency: z.string(),
  /** Currency symbol. */
  symbol: z.string(),
  /** Number of decimal places of amounts in this currency. */
  decimals: z.number().int().min(0).max(18),
  methods: z.array(methodEntrySchema),
});

/** The catalog: `data` of the getPaymentMethods reply. */
export const catalogSchema = z.object({
  currencies: z.array(currencyEntrySchema),
});

export type FieldEntry = z.output<typeof fieldEntrySchema>;
export type BankEntry = z.output<typeof bankEntrySchema>;
export type MethodEntry = z.output<typeof methodEntrySchema>;
export type CurrencyEntry = z.output<typeof currencyEntrySchema>;
export type Catalog = z.output<typeof catalogSchema>;

/** The catalog narrowed to one currency (an empty list when it is not enabled). */
export function narrowCatalog(catalog: Catalog, currency: string | undefined): Catalog {
  if (currency === undefined) return catalog;
  return { currencies: catalog.currencies.filter((c) => c.currency === currency) };
}
