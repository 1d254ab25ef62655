import { operatorActions, type Database } from '@mcb/core/db';
import { and, eq } from 'drizzle-orm';
import type { AuthMethod } from '../auth.ts';
import type { Operator } from '../operators/operator.ts';
import type { Action } from '../operators/roles.ts';
import { MAX_REASON, storableLine, storableText } from './text.ts';

/** One row of the audit trail, as an action writes it. */
export interface ActionRecord {
  operator: Operator;
  action: Action;
  /** What was acted on: `review:42`, `order:MO-1`, `job:callbacks/payin-P1-6`, `queue:callbacks/failed`, `sweep`. */
  target: string;
  /** Why, as given ('' only on a refusal that came without one, or a service's order registration). */
  reason: string;
  /** `applied`, `dismissed`, `denied`, `failed:<CODE>`, ... */
  outcome: string;
  requestId?: string;
  /** How the operator came in: `bearer`, `session` or `proxy` (SSO); none for an action without a request. */
  via?: AuthMethod;
  /** Counts and ids that explain the outcome; never a callback body, a key or a token. */
  details?: Record<string, unknown>;
  /** The number of the merchant the action is about (`operator_actions.merchant_no`); none for one about no merchant. */
  merchantNo?: string | null;
}

/**
 * Append one row to `operator_actions`. Pass the transaction of the action's effect, so that the effect and its
 * record commit together or not at all. The table refuses UPDATE and DELETE (migration 0004).
 */
export async function recordAction(tx: Database, record: ActionRecord): Promise<number> {
  const [row] = await tx
    .insert(operatorActions)
    .values({
      operator: record.operator.name,
      role: record.operator.role,
      action: record.action,
      // Cleaned, never refused: a refusal's row must be written whatever the request carried (a NUL in a target).
      target: storableLine(record.target, 300),
      reason: storableText(record.reason, MAX_REASON),
      outcome: storableLine(record.outcome, 200),
      requestId: record.requestId ?? null,
      via: record.via ?? null,
      details: record.details ?? null,
      merchantNo: record.merchantNo ?? null,
    })
    .returning({ id: operatorActions.id });
  return row!.id;
}

/** Outcome of an intent row: written before an effect that commits on its own, completed by {@link completeIntent}. */
export const PENDING = 'pending';

/**
 * Complete an intent row (outcome `pending`) with the effect's outcome: the one update the append-only trail allows
 * (migration 0006). Throws when the row is not pending any more (a bug: each intent is completed once).
 */
export async function completeIntent(
  tx: Database,
  id: number,
  outcome: string,
  details?: Record<string, unknown>,
): Promise<void> {
  const done = await tx
    .update(operatorActions)
    .set({ outcome: storableLine(outcome, 200), ...(details ? { details } : {}) })
    .where(and(eq(operatorActions.id, id), eq(operatorActions.outcome, PENDING)))
    .returning({ id: operatorActions.id });
  if (done.length !== 1) throw new Error(`audit row ${id} is not pending`);
}
