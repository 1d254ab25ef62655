import { bankEntrySchema, currencyEntrySchema, methodEntrySchema } from '@mcb/core/catalog';
import { z } from 'zod';

/** Response schemas of the catalog area (the payment-method catalog and its age). */

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
