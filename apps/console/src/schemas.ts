import { bankEntrySchema, currencyEntrySchema, methodEntrySchema } from '@mcb/core/catalog';
import { isDecimalString, isPositiveDecimal } from '@mcb/core/money';
import { z } from 'zod';

/**
 * Request and response schemas of the console API. They drive validation, serialization and the OpenAPI document.
 * Response schemas carry no transforms: fastify-type-provider-zod serializes with zod's `encode`.
 */

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
  .string({ error: (i) => (i.input === undefined ? 'required' : 'expected a decimal string such as "100.50", not a number') })
  .max(40, 'expected at most 40 characters')
  .refine(isDecimalString, 'expected a decimal string such as "100.50" (no exponent, no leading zeros)')
  .refine((v) => !isDecimalString(v) || isPositiveDecimal(v), 'must be greater than zero')
  .describe('Decimal string, e.g. "1500.50"');

export const customerIdSchema = z.string().min(1).max(128).describe("The merchant's customer identifier");

export const paymentMethodSchema = z.number().int().describe("The catalog method's `paymentMethod` number");

export const payoutParamsSchema = z
  .record(z.string().max(128), z.string().max(1024))
  .refine((p) => Object.keys(p).length <= 100, 'expected at most 100 parameters')
  .describe("Field values keyed by the catalog field's `key`");

/** Why an operator does what changes something; required by the action layer (400 REASON_REQUIRED without it). */
export const reasonSchema = z.string().max(2000, 'expected at most 2000 characters').describe('Why: recorded in the audit trail (required, except from a service client registering an order)');

export const payinBodySchema = z.strictObject({
  reason: reasonSchema.optional(),
  merchantOrderNo: merchantOrderNoSchema,
  currency: currencySchema,
  amount: amountSchema,
  customerId: customerIdSchema.optional(),
});

export const payoutBodySchema = z.strictObject({
  reason: reasonSchema.optional(),
  merchantOrderNo: merchantOrderNoSchema,
  currency: currencySchema,
  amount: amountSchema,
  paymentMethod: paymentMethodSchema,
  params: payoutParamsSchema,
  customerId: customerIdSchema.optional(),
});

/** The payout to validate; an order number is not needed for that. */
export const payoutValidateBodySchema = payoutBodySchema.extend({ merchantOrderNo: merchantOrderNoSchema.optional() });

export type PayinBody = z.output<typeof payinBodySchema>;
export type PayoutBody = z.output<typeof payoutBodySchema>;

export const problemSchema = z.object({ field: z.string(), message: z.string() });

/** Every error response: a stable code, a message for people, and the specifics of some codes. */
export const errorBodySchema = z
  .object({
    code: z.string().describe('A code from docs/errors.md'),
    message: z.string(),
    errors: z.array(problemSchema).optional().describe('Each problem with the field it is about (400, 422)'),
    platformCode: z.number().optional().describe("The platform's own error code (502)"),
    platformMessage: z.string().optional().describe("The platform's own message (502)"),
    requestId: z.string().optional(),
    requiredRole: z.enum(['viewer', 'operator', 'admin']).optional().describe('The role the refused action needs (403)'),
  })
  .describe('Error');

export const ledgerEntrySchema = z.object({
  entryType: z.enum(['payin_credit', 'payout_refund']),
  amount: z.string(),
  currency: z.string(),
  createdAt: z.string().describe('ISO-8601 instant'),
});

export const orderViewSchema = z.object({
  merchantOrderNo: z.string(),
  kind: z.enum(['payin', 'payout']),
  status: z.enum(['pending', 'credited', 'succeeded', 'refused']),
  currency: z.string(),
  amount: z.string(),
  platformOrderNo: z.string().nullable(),
  ledger: z.array(ledgerEntrySchema),
  review: z
    .object({ reason: z.string(), at: z.string().describe('ISO-8601 instant') })
    .nullable()
    .describe('The open review of a callback for this order, if any'),
});

/** A registered payout, plus the create-payout parameters keyed by apiParam. */
export const payoutOrderViewSchema = orderViewSchema.extend({
  paymentMethod: z.number().int(),
  apiParams: z.record(z.string(), z.string()),
});

export type OrderView = z.output<typeof orderViewSchema>;

/** Where a served catalog stands in time. */
export const catalogAgeSchema = z.object({
  fetchedAt: z.string().describe('When the platform returned it (ISO-8601)'),
  ageSeconds: z.number().int().describe('Seconds since fetchedAt'),
  stale: z.boolean().describe('True when the platform could not be asked and this is the last good copy'),
});

/**
 * The catalog as the platform returned it, plus its age: core's schemas (the ones the client parses with), except
 * `banks`, whose parsed form reads `null` as absent through a transform that response encoding cannot run backwards.
 */
export const catalogResponseSchema = z
  .object({
    currencies: z.array(
      currencyEntrySchema.extend({
        methods: z.array(methodEntrySchema.extend({ banks: z.array(bankEntrySchema).optional() })),
      }),
    ),
  })
  .extend(catalogAgeSchema.shape);

export const validateResponseSchema = z.object({
  ok: z.literal(true),
  apiParams: z.record(z.string(), z.string()).describe('Create-payout parameters keyed by apiParam'),
  catalog: catalogAgeSchema,
});
