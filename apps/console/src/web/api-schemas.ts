import { z } from 'zod';
import { PERSON_ROLES } from '../operators/roles.ts';

/**
 * Schemas every area's JSON routes share: the error body and the reason. Each area keeps its own request and
 * response schemas beside its routes. Response schemas carry no transforms: fastify-type-provider-zod serializes
 * with zod's `encode`.
 */

/** Why an operator does what changes something; required by the action layer (400 REASON_REQUIRED without it). */
export const reasonSchema = z
  .string()
  .max(2000, 'expected at most 2000 characters')
  .describe('Why: recorded in the audit trail (required, except from a service client registering an order)');

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
    requiredRole: z.enum(PERSON_ROLES).optional().describe('The role the refused action needs (403)'),
    merchants: z
      .array(z.string())
      .optional()
      .describe(
        'Merchant refs: those holding an ambiguous order number (409 MERCHANT_REQUIRED), or those to name (400)',
      ),
  })
  .describe('Error');
