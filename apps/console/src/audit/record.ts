import { operatorActions, type Database } from '@mcb/core/db';
import type { Operator } from '../operators/operator.ts';
import type { Action } from '../operators/roles.ts';

/** One row of the audit trail, as an action writes it. */
export interface ActionRecord {
  operator: Operator;
  action: Action;
  /** What was acted on: `review:42`, `order:MO-1`, `job:callbacks/payin-P1-6`, `queue:callbacks/failed`, `sweep`. */
  target: string;
  /** Why, as given ('' only on a refusal that came without one). */
  reason: string;
  /** `applied`, `dismissed`, `denied`, `failed:<CODE>`, ... */
  outcome: string;
  requestId?: string;
  /** Counts and ids that explain the outcome; never a callback body, a key or a token. */
  details?: Record<string, unknown>;
}

/**
 * Append one row to `operator_actions`. Pass the transaction of the action's effect, so that the effect and its
 * record commit together or not at all. The table refuses UPDATE and DELETE (migration 0004).
 */
export async function recordAction(tx: Database, record: ActionRecord): Promise<void> {
  await tx.insert(operatorActions).values({
    operator: record.operator.name,
    role: record.operator.role,
    action: record.action,
    target: record.target.slice(0, 300),
    reason: record.reason,
    outcome: record.outcome.slice(0, 200),
    requestId: record.requestId ?? null,
    details: record.details ?? null,
  });
}
