import { z } from 'zod';
import { catalogAgeSchema } from '../catalog/schemas.ts';
import {
  amountSchema,
  currencySchema,
  customerIdSchema,
  merchantOrderNoSchema,
  merchantRefSchema,
  orderViewSchema,
} from '../orders/schemas.ts';
import { reasonSchema } from '../web/api-schemas.ts';

/** Request and response schemas of the payouts area (registration validated against the catalog, validation alone). */

export const paymentMethodSchema = z.number().int().describe("The catalog method's `paymentMethod` number");

export const payoutParamsSchema = z
  .record(z.string().max(128), z.string().max(1024))
  .refine((p) => Object.keys(p).length <= 100, 'expected at most 100 parameters')
  .describe("Field values keyed by the catalog field's `key`");

export const payoutBodySchema = z.strictObject({
  reason: reasonSchema.optional(),
  merchant: merchantRefSchema.optional(),
  merchantOrderNo: merchantOrderNoSchema,
  currency: currencySchema,
  amount: amountSchema,
  paymentMethod: paymentMethodSchema,
  params: payoutParamsSchema,
  customerId: customerIdSchema.optional(),
});

/** The payout to validate; an order number is not needed for that. */
export const payoutValidateBodySchema = payoutBodySchema.extend({ merchantOrderNo: merchantOrderNoSchema.optional() });

export type PayoutBody = z.output<typeof payoutBodySchema>;

/** A registered payout, plus the create-payout parameters keyed by apiParam. */
export const payoutOrderViewSchema = orderViewSchema.extend({
  paymentMethod: z.number().int(),
  apiParams: z.record(z.string(), z.string()),
});

export type PayoutOrderView = z.output<typeof payoutOrderViewSchema>;

export const validateResponseSchema = z.object({
  ok: z.literal(true),
  apiParams: z.record(z.string(), z.string()).describe('Create-payout parameters keyed by apiParam'),
  catalog: catalogAgeSchema,
});

export type ValidateResponse = z.output<typeof validateResponseSchema>;
