import { isDecimalString, isPositiveDecimal } from '@mcb/core/money';
import { z } from 'zod';
import { reasonSchema } from '../web/api-schemas.ts';

/** Request and response schemas of the orders area (registration, the order view). */

/** Our own order number: 1–64 visible ASCII characters (it travels in URLs and logs). */
export const merchantOrderNoSchema = z
  .string()
  .regex(/^[\x21-\x7e]{1,64}$/, 'expected 1 to 64 visible ASCII characters without spaces')
  .describe("The merchant's own order number");

export const currencySchema = z
  .string()
  .regex(/^[A-Z0-9]{2,10}$/, 'expected an upper-case currency code such as PHP')
  .describe('Fiat currency code, as the catalog spells it');

/** A positive decimal string; numbers are refused so no amount ever passes through a float. */
export const amountSchema = z
  .string({
    error: (i) => (i.input === undefined ? 'required' : 'expected a decimal string such as "100.50", not a number'),
  })
  .max(40, 'expected at most 40 characters')
  .refine(isDecimalString, 'expected a decimal string such as "100.50" (no exponent, no leading zeros)')
  .refine((v) => !isDecimalString(v) || isPositiveDecimal(v), 'must be greater than zero')
  .describe('Decimal string, e.g. "1500.50"');

export const customerIdSchema = z.string().min(1).max(128).describe("The merchant's customer identifier");

/** A merchant's ref (MERCHANTS_FILE) in a body or a query; the console says whether it is one it serves. */
export const merchantRefSchema = z
  .string()
  .max(64, 'expected a merchant ref (at most 32 of a-z, 0-9 and -)')
  .describe("The merchant's ref (MERCHANTS_FILE); required when the console serves two or more merchants");

export const payinBodySchema = z.strictObject({
  reason: reasonSchema.optional(),
  merchant: merchantRefSchema.optional(),
  merchantOrderNo: merchantOrderNoSchema,
  currency: currencySchema,
  amount: amountSchema,
  customerId: customerIdSchema.optional(),
});

export type PayinBody = z.output<typeof payinBodySchema>;

export const ledgerEntrySchema = z.object({
  entryType: z.enum(['payin_credit', 'payout_refund']),
  amount: z.string(),
  currency: z.string(),
  createdAt: z.string().describe('ISO-8601 instant'),
});

export const orderViewSchema = z.object({
  merchant: z.string().optional().describe("The merchant's ref: present when the console serves two or more merchants"),
  merchantOrderNo: z.string(),
  kind: z.enum(['payin', 'payout']),
  status: z.enum(['pending', 'credited', 'succeeded', 'refused']),
  currency: z.string(),
  amount: z.string(),
  platformOrderNo: z.string().nullable(),
  customerId: z.string().nullable().describe('The customer the order was registered for (customerId), if given'),
  ledger: z.array(ledgerEntrySchema),
  review: z
    .object({ reason: z.string(), at: z.string().describe('ISO-8601 instant') })
    .nullable()
    .describe('The open review of a callback for this order, if any'),
});

export type OrderView = z.output<typeof orderViewSchema>;
