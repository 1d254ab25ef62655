import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { AuthMethod } from '../auth.ts';
import type { Role } from './roles.ts';

/** The authenticated person behind a request: set on every authenticated request as `req.operator`. */
export interface Operator {
  /** Unique within the console: from the operators file, `admin` for CONSOLE_TOKEN, or the SSO proxy's identity. */
  readonly name: string;
  readonly role: Role;
  /**
   * The merchants this operator may see and act on (its operators-file entry's `merchants`); none: every merchant.
   * Checked in one place, {@link inScope} (operators/scope.ts), by the action layer and the lists.
   */
  readonly scope?: MerchantScope;
}

/** An operator's merchants: their refs (as the operators file names them) and their numbers (as rows carry them). */
export interface MerchantScope {
  readonly refs: readonly string[];
  readonly merchantNos: ReadonlySet<string>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every request it lets through (not on /login and /logout). */
    operator?: Operator;
  }
}

/**
 * The operator of an authenticated request, its id and how it came in, as the action layer wants them (401 if none:
 * a wiring bug).
 */
export function actorOf(req: { operator?: Operator; id: string; authMethod?: AuthMethod }): {
  operator: Operator;
  requestId: string;
  via?: AuthMethod;
} {
  if (!req.operator) throw new AppError(ErrorCodes.UNAUTHORIZED, 'no operator on this request');
  return { operator: req.operator, requestId: req.id, ...(req.authMethod ? { via: req.authMethod } : {}) };
}
